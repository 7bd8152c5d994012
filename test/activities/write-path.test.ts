/**
 * The write path's PostgreSQL side (docs/design.md §8), against a real PostgreSQL: a change is
 * recorded once per decision, never refused for a stale view, and placement is one transaction.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { insertInstance } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import { applyInstanceChange, recordInstanceChange } from '../../activities/instance-records.js'
import { recordVmmObservations } from '../../activities/vmm-observations.js'
import type { InstanceChange } from '../../contract/records.js'
import { insertOperation } from '../../db/operations.js'
import { finishPlacedBoot, placeVmm, vmmIdOf } from '../../activities/vmm-records.js'
import { decisionKeys } from '../../domain/decisions.js'
import type { VmmReport } from '../../domain/vmm.js'
import { insertHost, startDatabase, type TestDatabase } from '../helpers/database.js'
import { setTimeout as sleep } from 'node:timers/promises'

describe('the write path in PostgreSQL', () => {
  let db: TestDatabase
  before(async () => {
    db = await startDatabase()
    await insertHost(db.pool, 'host-a')
  })
  after(async () => { await db?.stop() })

  async function newInstance (): Promise<string> {
    const id = randomUUID()
    const name = `i-${id.slice(0, 8)}`
    await inTransaction(db.pool, async (tx) => await insertInstance(tx, id, { name, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 30, restartPolicy: 'never', intendedState: 'running' }))
    return id
  }

  function stateChange (instanceId: string, decision: string, state: 'starting' | 'running' | 'stopped'): InstanceChange {
    return { instanceId, decision, kind: 'state-changed', message: `to ${state}`, set: { state } }
  }

  async function events (instanceId: string): Promise<string[]> {
    const { rows } = await db.pool.query('SELECT message FROM instance_events WHERE instance_id = $1 ORDER BY seq', [instanceId])
    return rows.map((row) => row.message)
  }

  /** Places a VMM for the instance, with no change before; the placement, asserted made. */
  async function placeOnce (instanceId: string): Promise<{ vmmId: string }> {
    const opId = randomUUID()
    const placed = await placeVmm(db.pool, {
      operationId: opId,
      vcpus: 1,
      memoryMiB: 256,
      change: { instanceId, decision: decisionKeys.placed(opId), kind: 'vmm-placed', message: 'placed VMM' }
    })
    assert.ok(placed.placed)
    return placed
  }

  function operation (id: string, status: 'running' | 'succeeded' | 'failed') {
    return { id, kind: 'start' as const, status, workflowId: 'instance-x', runId: 'run-1' }
  }

  it('records a decision once: made again, it changes nothing and says it was made before', async () => {
    const id = await newInstance()
    const first = await recordInstanceChange(db.pool, stateChange(id, 'test/a', 'starting'))
    assert.equal(first.madeBefore, false)
    await recordInstanceChange(db.pool, stateChange(id, 'test/b', 'running'))
    const again = await recordInstanceChange(db.pool, stateChange(id, 'test/a', 'starting'))
    assert.equal(again.madeBefore, true)
    assert.equal(again.snapshot.instance.state, 'running', 'the record as it is, not the repeated decision')
    assert.deepEqual(await events(id), ['to starting', 'to running'])
  })

  it('applies a new decision to the record as it is, whatever the execution last saw of it', async () => {
    const id = await newInstance()
    await recordInstanceChange(db.pool, stateChange(id, 'test/seen', 'starting'))
    // A reset's earlier run moved the record on; the execution does not know.
    await recordInstanceChange(db.pool, stateChange(id, 'test/unseen', 'running'))
    const result = await recordInstanceChange(db.pool, stateChange(id, 'test/next', 'stopped'))
    assert.equal(result.madeBefore, false)
    assert.equal(result.snapshot.instance.state, 'stopped')
    assert.equal(result.snapshot.instance.generation, 4)
  })

  it('keeps an operation\'s outcome once recorded', async () => {
    const id = await newInstance()
    const opId = randomUUID()
    await recordInstanceChange(db.pool, { ...stateChange(id, decisionKeys.finished(opId), 'running'), operation: operation(opId, 'succeeded') })
    await recordInstanceChange(db.pool, { ...stateChange(id, 'test/other', 'stopped'), operation: operation(opId, 'failed') })
    const { rows } = await db.pool.query('SELECT status FROM operations WHERE id = $1', [opId])
    assert.equal(rows[0].status, 'succeeded')
  })

  it('leaves a destroyed instance destroyed, recording the late change\'s event only', async () => {
    const id = await newInstance()
    await recordInstanceChange(db.pool, { instanceId: id, decision: 'test/destroy', kind: 'state-changed', message: 'destroyed', set: { state: 'destroyed', intendedState: 'destroyed', destroyed: true } })
    const late = await recordInstanceChange(db.pool, stateChange(id, 'test/late', 'running'))
    assert.equal(late.snapshot.instance.state, 'destroyed')
    assert.deepEqual(await events(id), ['destroyed', 'to running'])
  })

  it('places one VMM per operation: a retried placement finds it, holding one reservation', async () => {
    const id = await newInstance()
    const opId = randomUUID()
    const request = {
      operationId: opId,
      vcpus: 1,
      memoryMiB: 256,
      change: { instanceId: id, decision: decisionKeys.placed(opId), kind: 'vmm-placed' as const, message: 'placed VMM' },
      before: { ...stateChange(id, decisionKeys.started(opId), 'starting'), operation: operation(opId, 'running') }
    }
    const first = await placeVmm(db.pool, request)
    const again = await placeVmm(db.pool, request)
    assert.ok(first.placed && again.placed)
    assert.equal(first.vmmId, vmmIdOf(opId))
    assert.equal(again.vmmId, first.vmmId)
    assert.equal(again.snapshot.instance.activeVmmId, first.vmmId)
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM reservations WHERE vmm_id = $1', [first.vmmId])
    assert.equal(rows[0].n, 1)
    assert.deepEqual(await events(id), ['to starting', `placed VMM ${first.vmmId} on host-a`])
  })

  it('records a placed boot\'s finish when the agent answered running, once, named by the VMM and host; not when it answered starting', async () => {
    const id = await newInstance()
    const opId = randomUUID()
    const finish: InstanceChange = { ...stateChange(id, decisionKeys.finished(opId), 'running'), message: 'running', operation: operation(opId, 'succeeded') }
    const request = {
      operationId: opId,
      vcpus: 1,
      memoryMiB: 256,
      change: { instanceId: id, decision: decisionKeys.placed(opId), kind: 'vmm-placed' as const, message: 'placed VMM' },
      boot: { instanceName: 'i', spec: { vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' } }, finish }
    }
    const placed = await placeVmm(db.pool, request)
    assert.ok(placed.placed)
    const answer = (state: 'starting' | 'running', generation: number): VmmReport => ({
      vmmId: placed.vmmId, instanceId: id, hostId: 'host-a', state, generation, observedAt: new Date().toISOString(), reason: state, exit: null, unresponsiveSince: null
    })
    const starting = await finishPlacedBoot(db.pool, request, { ...placed, booted: answer('starting', 1) })
    assert.ok(starting.placed && starting.finished === undefined, 'an answer of starting leaves the boot to the workflow')
    assert.notEqual((await db.pool.query('SELECT state FROM instances WHERE id = $1', [id])).rows[0].state, 'running')

    const first = await finishPlacedBoot(db.pool, request, { ...placed, booted: answer('running', 2) })
    const again = await finishPlacedBoot(db.pool, request, { ...placed, booted: answer('running', 2) })
    assert.ok(first.placed && first.finished !== undefined && again.placed && again.finished !== undefined)
    assert.deepEqual([first.finished.madeBefore, again.finished.madeBefore], [false, true])
    assert.equal(first.finished.snapshot.instance.state, 'running')
    assert.deepEqual([first.finished.snapshot.activeVmm?.state, first.finished.snapshot.activeVmm?.generation], ['running', 2])
    assert.equal((await db.pool.query('SELECT status FROM operations WHERE id = $1', [opId])).rows[0].status, 'succeeded')
    assert.deepEqual((await events(id)).slice(-1), ['running on host-a'])
  })

  it('leaves no VMM and no reservation when the placement\'s instance change fails', async () => {
    const id = await newInstance()
    const opId = randomUUID()
    const broken = { instanceId: id, decision: decisionKeys.placed(opId), kind: 'vmm-placed' as const, message: 'placed VMM', set: { state: 'no-such-state' as 'running' } }
    await assert.rejects(placeVmm(db.pool, { operationId: opId, vcpus: 1, memoryMiB: 256, change: broken }), /instances_state_check/)
    const { rows } = await db.pool.query('SELECT (SELECT count(*) FROM vmms WHERE instance_id = $1)::int AS vmms, (SELECT count(*) FROM reservations WHERE vmm_id = $2)::int AS reservations', [id, vmmIdOf(opId)])
    assert.deepEqual(rows[0], { vmms: 0, reservations: 0 })
  })

  it('records the reports a change carries in its transaction, ignoring stale ones', async () => {
    const id = await newInstance()
    const placed = await placeOnce(id)
    const report = (state: 'starting' | 'running', generation: number): VmmReport => ({
      vmmId: placed.vmmId, instanceId: id, hostId: 'host-a', state, generation, observedAt: new Date().toISOString(), reason: state, exit: null, unresponsiveSince: null
    })
    const result = await recordInstanceChange(db.pool, { ...stateChange(id, 'test/running', 'running'), observations: [report('running', 2), report('starting', 1)] })
    assert.deepEqual(result.vmms.map((v) => [v.state, v.generation]), [['running', 2]])
    assert.equal(result.snapshot.activeVmm?.state, 'running')
  })

  it('notes once each when the active VMM\'s API stops and starts answering, and leaves out reports of VMMs it does not know', async () => {
    const id = await newInstance()
    const placed = await placeOnce(id)
    const since = '2026-11-27T10:00:00.000Z'
    const report = (generation: number, unresponsiveSince: string | null, vmmId = placed.vmmId): VmmReport => ({
      vmmId, instanceId: id, hostId: 'host-a', state: 'running', generation, observedAt: new Date().toISOString(), reason: 'running', exit: null, unresponsiveSince
    })
    for (const [generation, unresponsive] of [[1, null], [2, since], [3, since], [4, null]] as const) {
      await recordVmmObservations(db.pool, id, [report(generation, unresponsive)])
    }
    const unknown = await recordVmmObservations(db.pool, id, [report(5, null, randomUUID())])
    assert.deepEqual(unknown, [])
    assert.deepEqual((await events(id)).slice(1), [
      `VMM API unresponsive since ${since}; its process lives, and the state is unchanged`,
      'VMM API answers again'
    ])
  })

  it('places nothing for an instance destroyed before its placement', async () => {
    const id = await newInstance()
    await recordInstanceChange(db.pool, { instanceId: id, decision: 'test/destroyed', kind: 'state-changed', message: 'destroyed', set: { state: 'destroyed', destroyed: true } })
    const opId = randomUUID()
    const placed = await placeVmm(db.pool, {
      operationId: opId,
      vcpus: 1,
      memoryMiB: 256,
      change: { instanceId: id, decision: decisionKeys.placed(opId), kind: 'vmm-placed', message: 'placed VMM' },
      before: { ...stateChange(id, decisionKeys.started(opId), 'starting'), operation: operation(opId, 'running') }
    })
    assert.ok(!placed.placed && placed.code === 'InstanceDestroyed')
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM vmms WHERE instance_id = $1', [id])
    assert.equal(rows[0].n, 0)
    assert.equal(placed.snapshot.instance.state, 'destroyed')
  })

  it('lets the API write an operation\'s row while the workflow records the same operation, without a deadlock', async () => {
    // The workflow's change locks the instance, then upserts the operation; the API's insert of
    // the operation used to take the operation's key first and the instance (its foreign key)
    // second, and PostgreSQL broke the cycle by failing one of them ("deadlock detected"): a
    // 500 for a stop, found by the contract test.
    const id = await newInstance()
    const opId = randomUUID()
    const workflow = await db.pool.connect()
    try {
      await workflow.query('BEGIN')
      await workflow.query('SELECT 1 FROM instances WHERE id = $1 FOR UPDATE', [id])
      const api = insertOperation(db.pool, { kind: 'stop', operationId: opId, instanceId: id, requestedAt: new Date().toISOString(), graceSeconds: 30 }, 'run-1')
      await sleep(200)
      await applyInstanceChange(workflow, { ...stateChange(id, decisionKeys.finished(opId), 'stopped'), operation: operation(opId, 'succeeded') })
      await workflow.query('COMMIT')
      await api
    } finally {
      workflow.release()
    }
    const { rows } = await db.pool.query('SELECT status FROM operations WHERE id = $1', [opId])
    assert.equal(rows[0].status, 'succeeded', 'the outcome the workflow recorded stands')
  })
})
