/**
 * The fast layer's stand-in for everything an instance's workflow touches: an in-memory record
 * of instances, VMMs and decisions that behaves like activities/instance-records.ts,
 * vmm-records.ts and vmm-observations.ts (a decision is recorded once; reports by generation), and
 * host agents whose answers each test scripts. The workflows run for real, on the built bundle
 * and a real Temporal dev server (TestWorkflowEnvironment); only the activities are doubles.
 */
import { randomUUID } from 'node:crypto'
import type { Client } from '@temporalio/client'
import { ApplicationFailure } from '@temporalio/activity'
import type { EnsureVmmInput, LeaseJudgement, MigrationHalfInput, OperationSettings, PowerButtonInput, SendMigrationInput, VmmTarget } from '../../contract/activities.js'
import type { ChangeResult, InstanceChange, InstanceSnapshot, PlacementRequest, PlacementResult, RecordedMigration } from '../../contract/records.js'
import type { HostAnnouncement, HostStatus } from '../../domain/host.js'
import type { Instance } from '../../domain/instance.js'
import type { NewInstance } from '../../domain/requests.js'
import { MIGRATION_RECORD_PHASES, type MigrationRecordPhase } from '../../domain/migration.js'
import { reportDelivery } from '../../contract/workflows.js'
import { concludedReport, isTerminalVmmState, withReport, type MigrationHalfPhase, type MigrationRole, type VmmMigration, type VmmRecord, type VmmReport, type VmmState } from '../../domain/vmm.js'

export const TEST_SETTINGS: OperationSettings = {
  bootTimeoutMs: 3000,
  placementTimeoutMs: 3000,
  killBackstopMs: 500,
  hostUnreachableAfterMs: 60_000,
  orphanGraceMs: 60_000,
  restartBackoffMs: 10_000,
  restartBackoffMaxMs: 60_000,
  restartResetMs: 600_000,
  migration: { progressTimeoutMs: 2000, completionMsPerGiB: 20_000, downtimeMs: 300 }
}

/** How a scripted agent answers a call about a VMM. */
export type AgentAnswer = (vmm: VmmRecord) => VmmReport | null

export class WorkflowWorld {
  readonly instances = new Map<string, Instance>()
  readonly vmms = new Map<string, VmmRecord>()
  readonly decisions = new Map<string, string>()
  readonly events: Array<{ instanceId: string, decision: string, message: string }> = []
  readonly operations = new Map<string, { status: string, error: unknown }>()
  readonly calls: Array<{ name: string, vmmId: string }> = []
  /** Each migration's phases, in the order they were recorded, and its target. */
  readonly migrations = new Map<string, { phases: MigrationRecordPhase[], sourceVmmId: string | null, targetVmmId: string | null, cancelRequested: boolean, reason: string | null }>()
  /**
   * What host monitors asked for, in order: `heartbeat <host>`, `unreachable <host> since <time>`,
   * `lost <host>`, `fence <host>`, `readmit <host>`.
   */
  readonly hostActions: string[] = []
  /** Each release of an instance's storage, with what the world held at that moment. */
  readonly storageReleases: Array<{ instanceId: string, liveVmms: number, state: Instance['state'] }> = []
  hostHasRoom = true
  /**
   * Whether a placement that asks for a boot asks the agent (activities/host-agent-calls.ts
   * `bootPlaced`), as the real one does when the agent answers at once; off, the agent is never
   * asked in time and the workflow falls back to `ensureVmm`, as it does when the agent is slow.
   */
  bootsOnPlacement = false
  /** Each placement's request for a boot: whether it asked for one. */
  readonly placementBoots: boolean[] = []
  /** Runs before a placement answers, once it has placed its VMM (a report that outruns the answer). */
  beforePlacementAnswers: ((vmmId: string) => Promise<void>) | null = null
  /** What the executions are given as their settings. */
  settings: OperationSettings = TEST_SETTINGS
  /** Hosts whose agents answer nothing: every call to them fails as an unreachable host's does. */
  readonly unreachableHosts = new Set<string>()
  /** Hosts declared lost: placement takes them no more. */
  readonly lostHosts = new Set<string>()
  /** Hosts their lease declared lost (activities/host-leases.ts), readmitted when heard again. */
  readonly lostByLease = new Set<string>()
  /** What each judgement of a host's lease answers, in turn; once they run out, nothing changes until it is heard. */
  readonly leaseJudgements = new Map<string, LeaseJudgement[]>()
  /** Signals instances as the real activities do (a host declared lost tells its instances). */
  temporal: { client: Client, taskQueue: string } | null = null
  /** Runs when a decision has been recorded, before the activity that recorded it returns. */
  afterDecision: (decision: string) => Promise<void> = async () => {}
  agent: Record<'ensureVmm' | 'describeVmm' | 'destroyVmm' | 'pressPowerButton' | 'rebootVmm' | 'sendMigration' | 'cancelIncomingMigration' | 'resumeHeldSource', AgentAnswer> = {
    resumeHeldSource: (vmm) => this.report(vmm, 'running', null, this.half(vmm, 'source', 'failed')),
    ensureVmm: (vmm) => this.report(vmm, 'starting'),
    sendMigration: (vmm) => this.report(vmm, vmm.state, null, this.half(vmm, 'source', 'sending')),
    cancelIncomingMigration: (vmm) => vmm.migration?.phase === 'finished'
      ? this.report(vmm, vmm.state, null, vmm.migration)
      : this.report(vmm, 'destroyed', { cause: 'killed', code: null, signal: 'SIGKILL' }, this.half(vmm, 'target', 'failed')),
    describeVmm: (vmm) => this.report(vmm, vmm.state),
    destroyVmm: (vmm) => this.report(vmm, 'destroyed', { cause: 'killed', code: null, signal: 'SIGKILL' }),
    pressPowerButton: (vmm) => this.report(vmm, 'stopping'),
    rebootVmm: (vmm) => this.report(vmm, 'rebooting')
  }

  /** The last generation each VMM's agent gave out: an agent's generations only grow. */
  private readonly agentGenerations = new Map<string, number>()
  /** What each VMM's agent said last: what it says again when asked. */
  private readonly lastReports = new Map<string, VmmReport>()

  /** The agent's last word on the VMM, said again (at a new generation) when it is asked. */
  reportAgain (vmm: VmmRecord): VmmReport {
    const last = this.lastReports.get(vmm.id)
    return last === undefined ? this.report(vmm, vmm.state) : this.report(vmm, last.state, last.exit, last.migration)
  }

  /** The migration half a VMM's agent would report: of the instance's running migration. */
  half (vmm: VmmRecord, role: MigrationRole, phase: MigrationHalfPhase, iterations = vmm.migration?.iterations ?? 0): VmmMigration {
    const id = [...this.migrations.entries()].find(([, m]) => m.targetVmmId === vmm.id)?.[0] ?? vmm.migration?.id ?? [...this.migrations.keys()].at(-1)!
    return { id, role, phase, receiverUrl: role === 'target' ? `unix:/tmp/${id}.sock` : null, iterations, progressAt: new Date().toISOString(), reason: phase === 'failed' ? `${role} failed` : null }
  }

  /** A report of the VMM at its agent's next generation, as its agent would send it. */
  report (vmm: VmmRecord, state: VmmState, exit: VmmReport['exit'] = null, migration?: VmmMigration | null): VmmReport {
    const generation = Math.max(vmm.generation, this.agentGenerations.get(vmm.id) ?? 0) + 1
    this.agentGenerations.set(vmm.id, generation)
    const report: VmmReport = {
      vmmId: vmm.id,
      instanceId: vmm.instanceId,
      hostId: vmm.hostId,
      state,
      generation,
      observedAt: new Date().toISOString(),
      reason: state,
      exit,
      unresponsiveSince: null,
      ...(migration === undefined ? {} : { migration })
    }
    this.lastReports.set(vmm.id, report)
    return report
  }

  addInstance (id: string, spec: NewInstance, state: Instance['state'] = 'creating'): void {
    const now = new Date().toISOString()
    const { disks, interfaces, cloudInit, ...shape } = spec
    this.instances.set(id, {
      id,
      ...shape,
      onHostFailure: shape.onHostFailure ?? 'fail',
      // Disks and interfaces are rows of their own in PostgreSQL; the workflows only pass them on.
      disks: (disks ?? []).map((disk) => ({ ...disk, madeAt: null, destroyedAt: null })),
      interfaces: (interfaces ?? []).map((nic) => ({
        id: nic.id, slot: nic.slot, networkId: nic.networkId, networkName: 'test', ip: nic.ip ?? `10.0.0.${nic.slot + 2}`, prefixLength: 24, gateway: '10.0.0.1', mac: '02:00:00:00:00:01', releasedAt: null
      })),
      cloudInit: cloudInit ?? null,
      state,
      activeVmmId: null,
      generation: 1,
      lastError: null,
      restartAttempts: 0,
      restartAt: null,
      createdAt: now,
      updatedAt: now,
      destroyedAt: null
    })
  }

  /** host-1 for a start (host-2 once host-1 is lost); a migration's target goes to the host asked for, or host-2. */
  private hostFor (request: PlacementRequest): string {
    const target = request.migrationTarget
    if (target === undefined) return this.lostHosts.has('host-1') ? 'host-2' : 'host-1'
    return target.onlyHostId ?? (target.excludeHostId === 'host-2' ? 'host-1' : 'host-2')
  }

  snapshot (instanceId: string): InstanceSnapshot | null {
    const instance = this.instances.get(instanceId)
    if (instance === undefined) return null
    const all = [...this.vmms.values()].filter((v) => v.instanceId === instanceId)
    return {
      instance: { ...instance },
      liveVmms: all.filter((v) => !isTerminalVmmState(v.state)),
      activeVmm: all.find((v) => v.id === instance.activeVmmId) ?? null
    }
  }

  private observe (reports: VmmReport[]): VmmRecord[] {
    const touched = new Map<string, VmmRecord>()
    for (const report of reports) {
      const known = this.vmms.get(report.vmmId)
      if (known === undefined) continue
      const next = withReport(known, report)
      if (next !== null) this.vmms.set(next.id, next)
      touched.set(known.id, this.vmms.get(known.id)!)
    }
    return [...touched.values()]
  }

  private apply (change: InstanceChange): ChangeResult {
    const vmms = this.observe(change.observations ?? [])
    const instance = this.instances.get(change.instanceId)
    if (instance === undefined) throw new Error(`instance ${change.instanceId} does not exist`)
    const madeBefore = this.decisions.has(change.decision)
    if (!madeBefore) {
      this.decisions.set(change.decision, change.message)
      this.events.push({ instanceId: change.instanceId, decision: change.decision, message: change.message })
      if (instance.destroyedAt === null) {
        const { destroyed, ...set } = change.set ?? {}
        Object.assign(instance, Object.fromEntries(Object.entries(set).filter(([, value]) => value !== undefined)))
        if (destroyed === true) instance.destroyedAt = new Date().toISOString()
        instance.generation++
      }
      if (change.migration !== undefined) this.recordMigration(change.migration)
      const op = change.operation
      if (op !== undefined && this.operations.get(op.id)?.status !== 'succeeded' && this.operations.get(op.id)?.status !== 'failed') {
        this.operations.set(op.id, { status: op.status, error: op.error ?? null })
      }
    }
    return { snapshot: this.snapshot(change.instanceId)!, vmms, madeBefore }
  }

  private recordMigration (update: NonNullable<InstanceChange['migration']>): void {
    const known = this.migrations.get(update.id) ?? { phases: [], sourceVmmId: null, targetVmmId: null, cancelRequested: false, reason: null }
    known.phases.push(update.phase)
    if (update.source !== undefined) known.sourceVmmId = update.source.vmmId
    if (update.reason != null) known.reason = update.reason
    if (update.cancelRequested === true) known.cancelRequested = true
    this.migrations.set(update.id, known)
  }

  /** What `bootPlaced` answers: the scripted agent's answer to an ensure, or null (not asked, fence first, no answer). */
  private bootPlaced (request: PlacementRequest, vmmId: string, hostId: string, snapshot: InstanceSnapshot): VmmReport | null | undefined {
    if (request.boot === undefined) return undefined
    if (!this.bootsOnPlacement || snapshot.liveVmms.some((vmm) => vmm.id !== vmmId)) return null
    try {
      return this.agentCall('ensureVmm', { hostId, vmmId })
    } catch {
      return null
    }
  }

  private agentCall (name: keyof WorkflowWorld['agent'], target: VmmTarget): VmmReport | null {
    this.calls.push({ name, vmmId: target.vmmId })
    if (this.unreachableHosts.has(target.hostId)) throw ApplicationFailure.retryable(`${target.hostId}: connect ECONNREFUSED`, 'HostUnreachable')
    const vmm = this.vmms.get(target.vmmId)
    if (vmm === undefined) return null
    return this.agent[name](vmm)
  }

  /**
   * What activities/host-fencing.ts does to a host declared lost: its live VMMs become `lost` in
   * the records, and every instance that had one is told (but the one that asked, which takes the
   * answer), by the same concluded report.
   */
  async declareHostLost (hostId: string, byInstanceId: string | null): Promise<VmmRecord[]> {
    this.hostActions.push(`lost ${hostId}`)
    this.lostHosts.add(hostId)
    const lost: VmmRecord[] = []
    for (const vmm of this.vmms.values()) {
      if (vmm.hostId !== hostId || isTerminalVmmState(vmm.state)) continue
      const fenced: VmmRecord = { ...vmm, state: 'lost', reason: 'host declared lost', destroyedAt: new Date().toISOString() }
      this.vmms.set(vmm.id, fenced)
      lost.push(fenced)
    }
    for (const vmm of lost.filter((v) => v.instanceId !== byInstanceId)) {
      if (this.temporal === null) throw new Error('the world signals instances only once given a Temporal client')
      await this.temporal.client.workflow.signalWithStart('applyVmmReports', reportDelivery(concludedReport(vmm, 'lost', 'host declared lost', new Date().toISOString()), this.temporal.taskQueue))
    }
    return lost
  }

  /** The activities, as the worker registers them. */
  activities () {
    return {
      operationSettings: async (): Promise<OperationSettings> => this.settings,
      openExecution: async (instanceId: string, create?: NewInstance) => {
        if (create !== undefined && !this.instances.has(instanceId)) this.addInstance(instanceId, create)
        return { settings: this.settings, snapshot: this.snapshot(instanceId) }
      },
      recordInstanceChange: async (change: InstanceChange) => {
        const result = this.apply(change)
        await this.afterDecision(change.decision)
        return result
      },
      recordVmmObservations: async (_instanceId: string, reports: VmmReport[]) => this.observe(reports),
      placeVmm: async (request: PlacementRequest): Promise<PlacementResult> => {
        if (request.before !== undefined) this.apply(request.before)
        const { instanceId } = request.change
        const vmmId = `vmm-of-${request.operationId}`
        if (!this.vmms.has(vmmId)) {
          if (!this.hostHasRoom) return { placed: false, code: 'NoCapacity', reason: 'no active host has room', snapshot: this.snapshot(instanceId)! }
          const now = new Date().toISOString()
          this.vmms.set(vmmId, {
            id: vmmId, instanceId, hostId: this.hostFor(request), state: 'starting', generation: 0, reason: null, exit: null, unresponsiveSince: null, runningSince: null, migration: null, createdAt: now, updatedAt: now, destroyedAt: null
          })
        }
        const target = request.migrationTarget
        if (target !== undefined) this.migrations.get(target.migrationId)!.targetVmmId = vmmId
        const placed = this.apply({ ...request.change, vmmId, set: target === undefined ? { ...request.change.set, activeVmmId: vmmId } : request.change.set })
        const hostId = this.vmms.get(vmmId)!.hostId
        this.placementBoots.push(request.boot !== undefined)
        const booted = this.bootPlaced(request, vmmId, hostId, placed.snapshot)
        await this.beforePlacementAnswers?.(vmmId)
        // As activities/vmm-records.ts finishPlacedBoot: the boot's end, when the agent said the VM runs.
        const finish = request.boot?.finish
        if (finish === undefined || booted?.state !== 'running') return { placed: true, vmmId, hostId, snapshot: placed.snapshot, booted }
        const finished = this.apply({ ...finish, vmmId, message: `${finish.message} on ${hostId}`, observations: [booted] })
        await this.afterDecision(finish.decision)
        return { placed: true, vmmId, hostId, snapshot: placed.snapshot, booted, finished }
      },
      sendMigration: async (input: SendMigrationInput) => this.agentCall('sendMigration', input),
      cancelIncomingMigration: async (input: MigrationHalfInput) => this.agentCall('cancelIncomingMigration', input),
      resumeHeldSource: async (input: MigrationHalfInput) => this.agentCall('resumeHeldSource', input),
      readMigration: async (migrationId: string): Promise<RecordedMigration | null> => {
        const known = this.migrations.get(migrationId)
        if (known === undefined) return null
        return {
          id: migrationId,
          phase: known.phases.reduce((a, b) => MIGRATION_RECORD_PHASES.indexOf(b) > MIGRATION_RECORD_PHASES.indexOf(a) ? b : a),
          reason: known.reason,
          cancelRequested: known.cancelRequested,
          source: this.vmms.get(known.sourceVmmId!)!,
          target: known.targetVmmId === null ? null : this.vmms.get(known.targetVmmId) ?? null
        }
      },
      ensureVmm: async (input: EnsureVmmInput) => this.agentCall('ensureVmm', input),
      describeVmm: async (input: VmmTarget) => this.agentCall('describeVmm', input),
      destroyVmm: async (input: VmmTarget) => this.agentCall('destroyVmm', input),
      pressPowerButton: async (input: PowerButtonInput) => this.agentCall('pressPowerButton', input),
      rebootVmm: async (input: VmmTarget) => this.agentCall('rebootVmm', input),
      declareHostLost: async (hostId: string, byInstanceId: string | null) => await this.declareHostLost(hostId, byInstanceId),
      readmitHost: async (hostId: string) => {
        this.hostActions.push(`readmit ${hostId}`)
        this.lostHosts.delete(hostId)
        return true
      },
      // As activities/host-records.ts answers: a lost host stays lost whatever its agent says.
      recordHostHeartbeat: async (announcement: HostAnnouncement): Promise<HostStatus> => {
        this.hostActions.push(`heartbeat ${announcement.hostId}`)
        return this.lostHosts.has(announcement.hostId) ? 'lost' : 'active'
      },
      markHostUnreachable: async (hostId: string, lastHeardAt: string | null) => { this.hostActions.push(`unreachable ${hostId} since ${lastHeardAt ?? 'never'}`) },
      fenceLostVmms: async (hostId: string) => { this.hostActions.push(`fence ${hostId}`); return 0 },
      readmitHostLostByLease: async (hostId: string) => {
        if (!this.lostByLease.delete(hostId)) return false
        this.hostActions.push(`readmit-by-lease ${hostId}`)
        this.lostHosts.delete(hostId)
        return true
      },
      // As activities/host-leases.ts: a judgement that finds the host lost declares it, by its lease.
      judgeHostLease: async (hostId: string): Promise<LeaseJudgement> => {
        const judgement = this.leaseJudgements.get(hostId)?.shift() ?? { lost: false, judgeAgainInMs: null }
        this.hostActions.push(`judge ${hostId}: ${judgement.lost ? 'lost' : `again in ${judgement.judgeAgainInMs ?? 'never'}`}`)
        if (judgement.lost) {
          this.lostHosts.add(hostId)
          this.lostByLease.add(hostId)
        }
        return judgement
      },
      releaseInstanceStorage: async ({ instanceId }: { instanceId: string }) => {
        const snapshot = this.snapshot(instanceId)!
        this.storageReleases.push({ instanceId, liveVmms: snapshot.liveVmms.length, state: snapshot.instance.state })
        return 'released' as const
      }
    }
  }
}

export function newInstanceSpec (name = `i-${randomUUID().slice(0, 8)}`): NewInstance {
  return { name, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 5, restartPolicy: 'never', intendedState: 'running' }
}

/** What every request begins with: a new operation ID, the instance, now. */
export function requestBase (instanceId: string) {
  return { operationId: randomUUID(), instanceId, requestedAt: new Date().toISOString() }
}

/** Waits until `test` holds of the world, failing after a while. */
export async function until (what: string, test: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!await test()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
