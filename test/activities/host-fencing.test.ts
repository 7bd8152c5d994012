/**
 * Declaring a host lost is a durable fan-out (activities/host-fencing.ts), against a real
 * PostgreSQL and a Temporal client double that records the signals it is given and can fail as a
 * worker killed mid-loop would: a retry of the activity tells every instance, however far the
 * attempt before it got. And the reports it sends are conclusions PostgreSQL applies whatever the
 * generation it last recorded (domain/vmm.ts `isStaleReport`).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { Client } from '@temporalio/client'
import { MockActivityEnvironment } from '@temporalio/testing'
import { HostAgentClient } from '../../http/host-agent-client.js'
import { createHostFencing } from '../../activities/host-fencing.js'
import { recordVmmObservations } from '../../activities/vmm-observations.js'
import { insertInstance } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import { concludedReport, type VmmReport } from '../../domain/vmm.js'
import { insertHost, startDatabase, type TestDatabase } from '../helpers/database.js'

describe('declaring a host lost', () => {
  let db: TestDatabase
  before(async () => { db = await startDatabase() })
  after(async () => { await db?.stop() })

  async function instanceRunningOn (hostId: string, generation = 3): Promise<{ instanceId: string, vmmId: string }> {
    const instanceId = randomUUID()
    const vmmId = randomUUID()
    await inTransaction(db.pool, async (tx) => await insertInstance(tx, instanceId, { name: `f-${instanceId.slice(0, 8)}`, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 30, restartPolicy: 'never', intendedState: 'running' }))
    await db.pool.query("INSERT INTO vmms (id, instance_id, host_id, state, generation) VALUES ($1, $2, $3, 'running', $4)", [vmmId, instanceId, hostId, generation])
    await db.pool.query('INSERT INTO reservations (vmm_id, host_id, vcpus, memory_mib) VALUES ($1, $2, 1, 256)', [vmmId, hostId])
    await db.pool.query("UPDATE instances SET state = 'running', active_vmm_id = $1 WHERE id = $2", [vmmId, instanceId])
    return { instanceId, vmmId }
  }

  /** A client whose signalWithStart records each report, and fails from its `failFrom`-th call on. */
  function temporalDouble (signalled: VmmReport[], failFrom = Infinity): Client {
    let calls = 0
    return {
      // The activity runs its calls under its cancellation signal.
      withAbortSignal: async <T>(_signal: AbortSignal, call: () => Promise<T>) => await call(),
      workflow: {
        signalWithStart: async (_type: string, options: { signalArgs: [VmmReport] }) => {
          if (++calls >= failFrom) throw new Error('the worker died here')
          signalled.push(options.signalArgs[0])
          return { signaledRunId: 'run' }
        }
      }
    } as unknown as Client
  }

  async function declare (hostId: string, client: Client): Promise<void> {
    const fencing = createHostFencing({ pool: db.pool, client: new HostAgentClient({ token: 'x', timeoutMs: 1000 }), unreachableAfterMs: 60_000 })
    const env = new MockActivityEnvironment({ taskQueue: 'fencing-test' }, { client })
    await env.run(() => fencing.declareHostLost(hostId, null))
  }

  it('tells every instance on the host, even when the attempt before died after telling one', async () => {
    await insertHost(db.pool, 'host-f1')
    const instances = [await instanceRunningOn('host-f1'), await instanceRunningOn('host-f1'), await instanceRunningOn('host-f1')]
    const first: VmmReport[] = []
    await assert.rejects(declare('host-f1', temporalDouble(first, 2)), /the worker died here/)
    assert.equal(first.length, 1)
    const retried: VmmReport[] = []
    await declare('host-f1', temporalDouble(retried))
    assert.deepEqual(retried.map((r) => r.vmmId).sort(), instances.map((i) => i.vmmId).sort(), 'the retry tells every instance')
    for (const report of retried) {
      assert.equal(report.state, 'lost')
      assert.equal(report.concluded, true)
    }
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM vmms WHERE host_id = 'host-f1' AND state = 'lost'")
    assert.equal(rows[0].n, 3)
    const held = await db.pool.query("SELECT count(*)::int AS n FROM reservations WHERE host_id = 'host-f1'")
    assert.equal(held.rows[0].n, 0)
  })

  it('a conclusion is applied to a live VMM whatever the generation PostgreSQL holds', async () => {
    await insertHost(db.pool, 'host-f2')
    const { instanceId, vmmId } = await instanceRunningOn('host-f2', 7)
    const { rows } = await db.pool.query('SELECT id, instance_id, host_id, generation FROM vmms WHERE id = $1', [vmmId])
    // Made from a record read before PostgreSQL took the agent's later reports.
    const stale = concludedReport({ id: vmmId, instanceId, hostId: 'host-f2', generation: Number(rows[0].generation) - 4 } as never, 'destroyed', 'the host agent has no record of this VMM', new Date().toISOString())
    const [after] = await recordVmmObservations(db.pool, instanceId, [stale])
    assert.equal(after.state, 'destroyed')
    assert.equal(after.generation, 7, 'the generation never goes back')
  })
})
