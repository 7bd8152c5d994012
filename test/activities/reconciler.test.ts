/**
 * The reconciler closes an operation as interrupted only when no run carries it any more
 * (activities/reconciler.ts, `closeIfAbandoned`), against a real PostgreSQL and a Temporal client
 * double that plays the API accepting a request between the reconciler's look and its act.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { Client } from '@temporalio/client'
import { MockActivityEnvironment } from '@temporalio/testing'
import { createReconciler } from '../../activities/reconciler.js'
import type { DriftedInstance } from '../../contract/activities.js'
import { HostAgentClient } from '../../http/host-agent-client.js'
import { insertInstance } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import { insertOperation } from '../../db/operations.js'
import { insertHost, startDatabase, type TestDatabase } from '../helpers/database.js'

/** Runs of one workflow ID, as the double's describe() sees them. */
type RunStatus = 'RUNNING' | 'COMPLETED' | 'FAILED'

describe('the reconciler and operations in flight', () => {
  let db: TestDatabase
  before(async () => { db = await startDatabase() })
  after(async () => { await db?.stop() })

  /**
   * A client whose describe() answers from `runs`; `afterDescribe` runs once the answer is
   * chosen, as whatever happens in the world before the reconciler acts on it.
   */
  function temporalDouble (runs: Map<string, RunStatus>, latest: () => string, afterDescribe: () => Promise<void>, started: Array<{ type: string, args: unknown[] }> = []): Client {
    const handle = (runId?: string) => ({
      async describe () {
        const status = runs.get(runId ?? latest())
        await afterDescribe()
        return { status: { name: status } }
      }
    })
    return {
      // The activity runs its calls under its cancellation signal.
      withAbortSignal: async <T>(_signal: AbortSignal, call: () => Promise<T>) => await call(),
      workflow: {
        getHandle: (_workflowId: string, runId?: string) => handle(runId),
        // The re-drive's start: a new run, which nothing else looks at here.
        start: async (type: string, options: { args: unknown[] }) => {
          started.push({ type, args: options.args })
          return { firstExecutionRunId: 'run-redriven' }
        }
      }
    } as unknown as Client
  }

  async function stoppedInstanceWithAbandonedStart (): Promise<{ instanceId: string, abandoned: string }> {
    const instanceId = randomUUID()
    await inTransaction(db.pool, async (tx) => await insertInstance(tx, instanceId, { name: `r-${instanceId.slice(0, 8)}`, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 30, restartPolicy: 'never', intendedState: 'running' }))
    await db.pool.query("UPDATE instances SET state = 'stopped' WHERE id = $1", [instanceId])
    const abandoned = { kind: 'start' as const, operationId: randomUUID(), instanceId, requestedAt: new Date(Date.now() - 3_600_000).toISOString() }
    await insertOperation(db.pool, abandoned, 'run-failed')
    return { instanceId, abandoned: abandoned.operationId }
  }

  async function redrive (instanceId: string, client: Client): Promise<Map<string, string>> {
    const reconciler = createReconciler({ pool: db.pool, client: new HostAgentClient({ token: 'x', timeoutMs: 1000 }), unreachableAfterMs: 60_000, orphanGraceMs: 1 })
    const env = new MockActivityEnvironment({ workflowExecution: { workflowId: 'reconcile', runId: 'r' } }, { client })
    const drifted = { id: instanceId, name: 'r', state: 'stopped' as const, intendedState: 'running' as const, stopGraceSeconds: 30 }
    await env.run(() => reconciler.redriveInstance(drifted, randomUUID()))
    const { rows } = await db.pool.query('SELECT id, status FROM operations WHERE instance_id = $1', [instanceId])
    return new Map(rows.map((row) => [row.id, row.status]))
  }

  it('closes an operation whose run ended with nothing running after it', async () => {
    const { instanceId, abandoned } = await stoppedInstanceWithAbandonedStart()
    const status = await redrive(instanceId, temporalDouble(new Map([['run-failed', 'FAILED']]), () => 'run-failed', async () => {}))
    assert.equal(status.get(abandoned), 'failed')
  })

  it('never closes the operation of a request accepted between its look at Temporal and its act', async () => {
    const { instanceId } = await stoppedInstanceWithAbandonedStart()
    const runs = new Map<string, RunStatus>([['run-failed', 'FAILED']])
    let latest = 'run-failed'
    const accepted = { kind: 'start' as const, operationId: randomUUID(), instanceId, requestedAt: new Date().toISOString() }
    let looks = 0
    // The API accepts a start right after the reconciler's first look: a new run, its operation.
    const status = await redrive(instanceId, temporalDouble(runs, () => latest, async () => {
      if (++looks !== 1) return
      runs.set('run-new', 'RUNNING')
      latest = 'run-new'
      await insertOperation(db.pool, accepted, 'run-new')
    }))
    assert.equal(status.get(accepted.operationId), 'running', 'the request accepted meanwhile was closed as interrupted')
  })

  it('carries on a migration its execution left unfinished: its own operation, from its record, never a start', async () => {
    const { instanceId } = await stoppedInstanceWithAbandonedStart()
    await insertHost(db.pool, `host-${instanceId.slice(0, 8)}`)
    const vmmId = randomUUID()
    await db.pool.query("INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, $3, 'running')", [vmmId, instanceId, `host-${instanceId.slice(0, 8)}`])
    await db.pool.query("UPDATE instances SET state = 'migrating', active_vmm_id = $1, updated_at = now() - interval '1 hour' WHERE id = $2", [vmmId, instanceId])
    const migration = { kind: 'migrate' as const, operationId: randomUUID(), instanceId, requestedAt: new Date(Date.now() - 3_600_000).toISOString() }
    await db.pool.query("INSERT INTO migrations (id, instance_id, source_vmm_id, source_host_id, phase) VALUES ($1, $2, $3, $4, 'sending')", [migration.operationId, instanceId, vmmId, `host-${instanceId.slice(0, 8)}`])
    await insertOperation(db.pool, migration, 'run-failed')
    const started: Array<{ type: string, args: unknown[] }> = []
    const client = temporalDouble(new Map([['run-failed', 'FAILED']]), () => 'run-failed', async () => {}, started)
    const reconciler = createReconciler({ pool: db.pool, client: new HostAgentClient({ token: 'x', timeoutMs: 1000 }), unreachableAfterMs: 60_000, orphanGraceMs: 1 })
    const env = new MockActivityEnvironment({ workflowExecution: { workflowId: 'reconcile', runId: 'r' } }, { client })
    const listed: DriftedInstance[] = await env.run(reconciler.driftedInstances)
    const drifted = listed.find((i) => i.id === instanceId)
    assert.ok(drifted !== undefined, 'a migrating instance with no execution is found')
    await env.run(() => reconciler.redriveInstance(drifted, randomUUID()))
    assert.deepEqual(started.map((s) => s.type), ['migrateInstance'])
    assert.equal((started[0]!.args[0] as { operationId: string }).operationId, migration.operationId, 'the migration\'s own operation')
    const { rows } = await db.pool.query('SELECT status FROM operations WHERE id = $1', [migration.operationId])
    assert.equal(rows[0].status, 'running', 'its operation is carried on, not closed')
  })
})
