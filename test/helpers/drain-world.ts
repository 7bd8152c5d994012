/**
 * The fast layer's stand-in for what a host drain (workflows/drain-host.ts) reads and writes, as
 * activities/drains.ts does against PostgreSQL: instances and their VMMs on hosts, the migrate
 * operations the drain asks for and their outcomes, and the progress it records. Nothing here
 * moves by itself: each test plays what a migration does to the world (`endMigration`, or by
 * hand for a migration caught half-way).
 */
import { randomUUID } from 'node:crypto'
import type { Client } from '@temporalio/client'
import type { DrainProgress, InstanceOnHost } from '../../contract/activities.js'
import type { InstanceState } from '../../domain/instance.js'
import type { MigrateRequest } from '../../domain/requests.js'
import { isTerminalVmmState, type VmmState } from '../../domain/vmm.js'
import { drainWorkflowId, type DrainHostInput } from '../../contract/workflows.js'

interface DrainInstance {
  id: string
  state: InstanceState
  activeVmmId: string | null
}

interface DrainVmm {
  id: string
  instanceId: string
  hostId: string
  state: VmmState
}

export class DrainWorld {
  readonly instances = new Map<string, DrainInstance>()
  readonly vmms = new Map<string, DrainVmm>()
  /** The migrations the drain asked for, in order. */
  readonly migrationsAsked: MigrateRequest[] = []
  /** The outcome of each migrate operation that ended, by its ID. */
  readonly outcomes = new Map<string, { status: 'succeeded' | 'failed', error: string | null }>()
  /** Every progress recorded, in order. */
  readonly progress: DrainProgress[] = []
  /** How many times each host was looked at: once a round of its drain. */
  readonly looks = new Map<string, number>()
  /**
   * Runs before a progress is recorded: a test may hold the drain of `hostId` there. (A drain a
   * test before terminated may still have its progress on the way: a hook takes only its host's.)
   */
  beforeProgress: (hostId: string, progress: DrainProgress) => Promise<void> = async () => {}

  /** A running instance whose active VMM runs on `hostId`; answers the instance's ID. */
  addInstance (hostId: string): string {
    const id = randomUUID()
    this.instances.set(id, { id, state: 'running', activeVmmId: null })
    this.instances.get(id)!.activeVmmId = this.addVmm(id, hostId, 'running')
    return id
  }

  /** A VMM of the instance on `hostId`, not its active one; answers the VMM's ID. */
  addVmm (instanceId: string, hostId: string, state: VmmState): string {
    const id = randomUUID()
    this.vmms.set(id, { id, instanceId, hostId, state })
    return id
  }

  /**
   * Plays a migrate operation the drain asked for to its end: one that succeeded moved the
   * instance's active VMM to another host, the source gone; one that failed left it where it was.
   */
  endMigration (request: MigrateRequest, outcome: { status: 'succeeded' } | { status: 'failed', error: string }): void {
    if (outcome.status === 'succeeded') {
      const instance = this.instances.get(request.instanceId)!
      this.vmms.get(instance.activeVmmId!)!.state = 'destroyed'
      instance.activeVmmId = this.addVmm(instance.id, newHostId(), 'running')
    }
    this.outcomes.set(request.operationId, { status: outcome.status, error: outcome.status === 'failed' ? outcome.error : null })
  }

  /** The last progress the drain recorded. */
  lastProgress (drainId: string): DrainProgress | undefined {
    return this.progress.filter((p) => p.drainId === drainId).at(-1)
  }

  private instancesOnHost (hostId: string): InstanceOnHost[] {
    this.looks.set(hostId, (this.looks.get(hostId) ?? 0) + 1)
    const live = [...this.vmms.values()].filter((v) => v.hostId === hostId && !isTerminalVmmState(v.state))
    return [...this.instances.values()]
      .filter((i) => live.some((v) => v.instanceId === i.id))
      .map((i) => ({ id: i.id, name: `i-${i.id.slice(0, 8)}`, state: i.state, activeElsewhere: !live.some((v) => v.id === i.activeVmmId) }))
  }

  /** The activities, as the worker registers them. */
  activities () {
    return {
      instancesOnHost: async (hostId: string) => this.instancesOnHost(hostId),
      requestMigration: async (request: MigrateRequest) => {
        if (!this.migrationsAsked.some((r) => r.operationId === request.operationId)) this.migrationsAsked.push(request)
        return 'started' as const
      },
      operationOutcomes: async (operationIds: string[]) =>
        Object.fromEntries(operationIds.flatMap((id) => this.outcomes.has(id) ? [[id, this.outcomes.get(id)!]] : [])),
      recordDrainProgress: async (hostId: string, progress: DrainProgress) => {
        await this.beforeProgress(hostId, progress)
        this.progress.push(progress)
      }
    }
  }
}

export function newHostId (): string {
  return `host-${randomUUID().slice(0, 8)}`
}

/** Starts a drain of the host, two migrations at a time, as the API does. */
export async function startDrain (client: Client, taskQueue: string, hostId: string) {
  const input: DrainHostInput = { hostId, drainId: randomUUID(), concurrency: 2 }
  const handle = await client.workflow.start('drainHost', { taskQueue, workflowId: drainWorkflowId(hostId), args: [input] })
  return { input, handle }
}
