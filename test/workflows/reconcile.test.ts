/**
 * A reconciler pass (workflows/reconcile.ts) in the fast layer, its activities doubles that
 * answer as activities/reconciler.ts would: every reconcilable host's inventory asked for, the
 * shared storage read once through the first of them, each drifted instance re-driven with an
 * operation of its own, lost hosts told again, abandoned operations closed, leaks released, and
 * the pass recorded with what it found and did, which is also its result. What each activity
 * does is test/activities/reconciler.test.ts's (on PostgreSQL); the pass on real hosts,
 * test/integration/reconciler.test.ts's.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { DriftedInstance, HostReconciliation, ReconcilePass } from '../../contract/activities.js'
import type { ReconcileSummary } from '../../workflows/reconcile.js'
import { startWorkerEnvironment, type WorkerEnvironment } from '../helpers/workflow-environment.js'

const TASK_QUEUE = 'reconcile-test'

function drifted (name: string): DriftedInstance {
  return { id: randomUUID(), name, state: 'starting', intendedState: 'running', stopGraceSeconds: 30 }
}

/** What the pass's activities are given to find, and what they were asked. */
class ReconcileWorld {
  hosts: string[] = []
  reachable = new Set<string>()
  drifted: DriftedInstance[] = []
  readonly inventories: string[] = []
  readonly storageReads: string[] = []
  readonly redriven: Array<{ name: string, operationId: string }> = []
  readonly passes: ReconcilePass[] = []

  activities () {
    return {
      reconcilableHosts: async () => this.hosts,
      reconcileHost: async (hostId: string): Promise<HostReconciliation> => {
        this.inventories.push(hostId)
        return this.reachable.has(hostId)
          ? { hostId, reachable: true, counts: { orphansReaped: 1 }, actions: [`reaped an orphan on ${hostId}`] }
          : { hostId, reachable: false, counts: {}, actions: [] }
      },
      reconcileStorage: async (hostId: string): Promise<HostReconciliation> => {
        this.storageReads.push(hostId)
        return { hostId, reachable: true, counts: { seedsRemoved: 2 }, actions: ['removed 2 seeds'] }
      },
      driftedInstances: async () => this.drifted,
      // The first is re-driven; the second's workflow turned out to be running, and is left alone.
      redriveInstance: async (instance: DriftedInstance, operationId: string) => {
        this.redriven.push({ name: instance.name, operationId })
        return instance.id === this.drifted[0]!.id ? `started ${instance.name}` : null
      },
      retellHostLosses: async () => ['told an instance its VMM was fenced'],
      closeAbandonedOperations: async () => ['closed an operation'],
      releaseLeakedReservations: async () => 3,
      releaseLeakedAddresses: async () => 0,
      purgeIdempotencyKeys: async () => 4,
      recordReconcilePass: async (pass: ReconcilePass) => { this.passes.push(pass) }
    }
  }
}

describe('a reconciler pass (workflow logic)', { timeout: 60_000 }, () => {
  let env: WorkerEnvironment
  let world: ReconcileWorld

  before(async () => {
    world = new ReconcileWorld()
    env = await startWorkerEnvironment(TASK_QUEUE, world.activities())
  })
  after(async () => { await env?.stop() })
  beforeEach(() => {
    for (const list of [world.inventories, world.storageReads, world.redriven, world.passes]) list.length = 0
  })

  async function pass (): Promise<ReconcileSummary> {
    return await env.client.workflow.execute('reconcile', { taskQueue: TASK_QUEUE, workflowId: `reconcile-${randomUUID()}` }) as ReconcileSummary
  }

  it('asks every host, reads the storage once, re-drives each drifted instance with an operation of its own, and records what it found and did', async () => {
    world.hosts = ['host-1', 'host-2']
    world.reachable = new Set(['host-1'])
    world.drifted = [drifted('stuck'), drifted('racing')]
    const summary = await pass()
    assert.deepEqual(world.inventories.sort(), ['host-1', 'host-2'])
    assert.deepEqual(world.storageReads, ['host-1'], 'through the first host, once')
    assert.deepEqual(world.redriven.map((r) => r.name), ['stuck', 'racing'])
    assert.notEqual(world.redriven[0]!.operationId, world.redriven[1]!.operationId)
    assert.deepEqual(summary.counts, {
      hostsChecked: 1,
      hostsUnreachable: 1,
      orphansReaped: 1,
      seedsRemoved: 2,
      instancesRedriven: 1,
      hostLossesRetold: 1,
      operationsClosed: 1,
      reservationsReleased: 3,
      idempotencyKeysExpired: 4
    })
    assert.deepEqual(summary.actions, ['reaped an orphan on host-1', 'removed 2 seeds', 'started stuck', 'told an instance its VMM was fenced', 'closed an operation'])
    assert.equal(world.passes.length, 1)
    assert.deepEqual({ id: world.passes[0]!.id, counts: world.passes[0]!.counts, actions: world.passes[0]!.actions }, { id: summary.passId, counts: summary.counts, actions: summary.actions })
  })

  it('with no host to ask, reads no storage and still mends what PostgreSQL alone holds', async () => {
    world.hosts = []
    world.drifted = []
    const summary = await pass()
    assert.deepEqual(world.storageReads, [])
    assert.deepEqual(summary.counts, { hostLossesRetold: 1, operationsClosed: 1, reservationsReleased: 3, idempotencyKeysExpired: 4 })
    assert.equal(world.passes.length, 1)
  })
})
