/**
 * What the API does with the requests it accepts (api/services/instance-requests.ts,
 * host-drains.ts): each one is the workflow start or signal the contract names
 * (contract/workflows.ts), under the instance's workflow ID, with the request as its argument,
 * and the operation's row, which names the run that has it. A create, start, reboot and migrate
 * start their workflows with the "fail if running" policy, and one that finds an execution
 * applying reports hands its request over to it; a stop and a delete reach whatever runs by
 * signalWithStart; a cancel signals the migration's execution; a drain cordons and records before
 * it starts `drain-<host>`, and an uncordon tells the drain to stop. A retry with its
 * Idempotency-Key is answered what the first attempt was, and sends Temporal nothing again.
 *
 * The API runs in process over a real PostgreSQL, with a stub in Temporal's place
 * (helpers/temporal-stub.ts); the test plays the workflows' part by writing the rows they would
 * (helpers/played-workflows.ts).
 * What the workflows do with these requests is test/workflows/'s.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { instanceWorkflowId } from '../../domain/ids.js'
import { drainWorkflowId, RECONCILE_SCHEDULE_ID, WORKFLOW_TYPES } from '../../contract/workflows.js'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { endOperations } from '../helpers/played-workflows.js'
import { TemporalStub, type TemporalCall } from '../helpers/temporal-stub.js'

const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }

interface Accepted {
  instance: { id: string, name: string, state: string, disks: Array<{ id: string }>, interfaces: Array<{ id: string, ip: string, network: { name: string } }>, operation: { id: string } | null }
  operation: { id: string, kind: string, status: string } | null
  message?: string
}

describe('requests the API accepts, sent on to Temporal', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()

  before(async () => {
    api = await startInProcessApi({ temporal })
    await api.database.pool.query(`INSERT INTO hosts (id, agent_url, vcpus, memory_mib, storage_gib) VALUES
      ('host-1', 'http://127.0.0.1:1', 8, 8192, 100), ('host-2', 'http://127.0.0.1:1', 8, 8192, 100)`)
  })
  after(async () => { await api?.stop() })

  async function send (method: 'POST' | 'DELETE' | 'GET', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method, url, headers: { ...auth, ...headers }, ...(payload === undefined ? {} : { payload }) })
  }

  function acceptedBy (response: LightMyRequestResponse, status = 202): Accepted {
    assert.equal(response.statusCode, status, response.body)
    return response.json() as Accepted
  }

  /** The operation's row as the API wrote it. */
  async function operationRow (id: string): Promise<{ kind: string, status: string, runId: string, params: unknown } | undefined> {
    const { rows } = await api.database.pool.query('SELECT kind, status, run_id AS "runId", params FROM operations WHERE id = $1', [id])
    return rows[0]
  }

  /** The one call the request sent, checked against what it must be. */
  function onlyCallSince (count: number, expected: Partial<TemporalCall>): TemporalCall {
    const sent = temporal.calls.slice(count)
    assert.equal(sent.length, 1, JSON.stringify(sent))
    for (const [key, value] of Object.entries(expected)) assert.deepEqual(sent[0]![key as keyof TemporalCall], value, key)
    return sent[0]!
  }

  async function settle (instanceId: string, state: 'running' | 'stopped', hostId?: string): Promise<void> {
    await endOperations(api.database.pool, temporal, instanceId, state, hostId)
  }

  async function created (name: string, start = true): Promise<Accepted> {
    return acceptedBy(await send('POST', '/v1/instances', { name, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, start, dataDisks: [{ name: 'data', sizeGiB: 1 }] }))
  }

  it('creates: the rows, then createInstance under instance-<id> with the request, failing if one runs; the operation names its run', async () => {
    const network = await send('POST', '/v1/networks', { name: 'default', cidr: '10.40.0.0/24' })
    assert.equal(network.statusCode, 201, network.body)
    assert.deepEqual((await send('GET', '/v1/networks/default')).json().cidr, '10.40.0.0/24')
    const count = temporal.calls.length
    const body = await created('made')
    assert.equal(body.instance.state, 'creating')
    assert.equal(body.instance.disks.length, 1)
    assert.deepEqual(body.instance.interfaces.map((nic) => nic.network.name), ['default'])
    assert.match(body.instance.interfaces[0]!.ip, /^10\.40\.0\.\d+$/)
    assert.deepEqual([body.operation?.kind, body.operation?.status], ['create', 'running'])
    const call = onlyCallSince(count, { call: 'start', id: instanceWorkflowId(body.instance.id), workflowType: WORKFLOW_TYPES.create })
    assert.equal(call.options?.workflowIdConflictPolicy, 'FAIL')
    const request = call.args[0] as { kind: string, operationId: string, instance: { name: string, intendedState: string, disks: unknown[] } }
    assert.deepEqual([request.kind, request.operationId, request.instance.name, request.instance.intendedState], ['create', body.operation!.id, 'made', 'running'])
    assert.equal(request.instance.disks.length, 1, 'the workflow is given the disks the API chose')
    assert.deepEqual(await operationRow(body.operation!.id), { kind: 'create', status: 'running', runId: temporal.runOf(call.id), params: {} })
  })

  it('answers a create retried with its Idempotency-Key as the first time, and starts nothing again', async () => {
    const key = { 'idempotency-key': randomUUID() }
    const payload = { name: 'keyed', vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, start: false }
    const first = acceptedBy(await send('POST', '/v1/instances', payload, key))
    const count = temporal.calls.length
    const again = await send('POST', '/v1/instances', payload, key)
    const replayed = acceptedBy(again)
    assert.equal(again.headers['idempotency-replayed'], 'true')
    assert.deepEqual([replayed.instance.id, replayed.operation?.id], [first.instance.id, first.operation?.id])
    assert.equal(temporal.calls.length, count, 'nothing was sent to Temporal again')
    assert.equal(temporal.callsOf(instanceWorkflowId(first.instance.id)).length, 1)
  })

  it('starts a stopped instance with startInstance, failing if one runs', async () => {
    const { instance } = await created('starts', false)
    await settle(instance.id, 'stopped')
    const count = temporal.calls.length
    const body = acceptedBy(await send('POST', `/v1/instances/${instance.id}/start`))
    const call = onlyCallSince(count, { call: 'start', id: instanceWorkflowId(instance.id), workflowType: WORKFLOW_TYPES.start })
    assert.equal(call.options?.workflowIdConflictPolicy, 'FAIL')
    assert.deepEqual(call.args[0], { kind: 'start', operationId: body.operation!.id, instanceId: instance.id, requestedAt: (call.args[0] as { requestedAt: string }).requestedAt })
    assert.equal((await operationRow(body.operation!.id))?.status, 'running')
    assert.equal(body.instance.operation?.id, body.operation!.id, 'the instance shows the operation in flight')
  })

  it('hands a start over to an execution that only takes in reports: operationRequested, and the operation names that run', async () => {
    const { instance } = await created('handed', false)
    await settle(instance.id, 'stopped')
    // A report (the guest powered off, say) started an execution that runs no operation.
    const reportsRun = temporal.startedElsewhere(instanceWorkflowId(instance.id))
    const count = temporal.calls.length
    const body = acceptedBy(await send('POST', `/v1/instances/${instance.id}/start`))
    const sent = temporal.calls.slice(count)
    assert.deepEqual(sent.map((c) => [c.call, c.workflowType, c.signal ?? null]), [['start', WORKFLOW_TYPES.start, null], ['signalWithStart', WORKFLOW_TYPES.start, 'operationRequested']])
    assert.deepEqual((sent[1]!.args[0] as { operationId: string }).operationId, body.operation!.id)
    assert.equal((await operationRow(body.operation!.id))?.runId, reportsRun)
  })

  it('stops a running instance by signalWithStart of haltRequested, with its grace period or the one asked', async () => {
    const { instance } = await created('stops')
    await settle(instance.id, 'running')
    let count = temporal.calls.length
    const body = acceptedBy(await send('POST', `/v1/instances/${instance.id}/stop`, { graceSeconds: 0 }))
    const call = onlyCallSince(count, { call: 'signalWithStart', id: instanceWorkflowId(instance.id), workflowType: WORKFLOW_TYPES.stop, signal: 'haltRequested' })
    assert.deepEqual([(call.args[0] as { kind: string }).kind, (call.args[0] as { graceSeconds: number }).graceSeconds], ['stop', 0])
    assert.deepEqual(call.options?.args, call.options?.signalArgs, 'a new execution starts with the stop it was sent')
    assert.deepEqual((await operationRow(body.operation!.id))?.params, { graceSeconds: 0 })

    // A second stop, without a body, reaches the same execution with the instance's own grace period.
    count = temporal.calls.length
    const second = acceptedBy(await send('POST', `/v1/instances/${instance.id}/stop`))
    const again = onlyCallSince(count, { call: 'signalWithStart', workflowType: WORKFLOW_TYPES.stop, signal: 'haltRequested' })
    assert.equal((again.args[0] as { graceSeconds: number }).graceSeconds, 30, "the instance's stopGraceSeconds (the API's default)")
    assert.equal((await operationRow(second.operation!.id))?.runId, (await operationRow(body.operation!.id))?.runId, 'both name the run that has them')
  })

  it('answers a stop retried with its Idempotency-Key with the first stop\'s operation, signalling nothing again', async () => {
    const { instance } = await created('stops-once')
    await settle(instance.id, 'running')
    const key = { 'idempotency-key': randomUUID() }
    const first = acceptedBy(await send('POST', `/v1/instances/${instance.id}/stop`, {}, key))
    const count = temporal.calls.length
    const again = await send('POST', `/v1/instances/${instance.id}/stop`, {}, key)
    assert.equal(acceptedBy(again).operation?.id, first.operation!.id)
    assert.equal(again.headers['idempotency-replayed'], 'true')
    assert.equal(temporal.calls.length, count)
  })

  it('reboots a running instance with rebootInstance, failing if one runs', async () => {
    const { instance } = await created('reboots')
    await settle(instance.id, 'running')
    const count = temporal.calls.length
    const body = acceptedBy(await send('POST', `/v1/instances/${instance.id}/reboot`))
    const call = onlyCallSince(count, { call: 'start', id: instanceWorkflowId(instance.id), workflowType: WORKFLOW_TYPES.reboot })
    assert.equal(call.options?.workflowIdConflictPolicy, 'FAIL')
    assert.equal((call.args[0] as { operationId: string }).operationId, body.operation!.id)
    assert.equal((await operationRow(body.operation!.id))?.kind, 'reboot')
  })

  it('deletes by signalWithStart of haltRequested to deleteInstance, with the grace period asked', async () => {
    const { instance } = await created('deleted')
    await settle(instance.id, 'running')
    const count = temporal.calls.length
    const body = acceptedBy(await send('DELETE', `/v1/instances/${instance.id}?graceSeconds=5`))
    const call = onlyCallSince(count, { call: 'signalWithStart', id: instanceWorkflowId(instance.id), workflowType: WORKFLOW_TYPES.delete, signal: 'haltRequested' })
    assert.deepEqual([(call.args[0] as { kind: string }).kind, (call.args[0] as { graceSeconds: number }).graceSeconds], ['delete', 5])
    assert.deepEqual(await operationRow(body.operation!.id), { kind: 'delete', status: 'running', runId: temporal.runOf(call.id), params: { graceSeconds: 5 } })
  })

  it('migrates with migrateInstance to the host asked, and cancels by signalling the migration\'s execution', async () => {
    const { instance } = await created('moves')
    await settle(instance.id, 'running', 'host-1')
    let count = temporal.calls.length
    const body = acceptedBy(await send('POST', `/v1/instances/${instance.id}/migrate`, { targetHostId: 'host-2' }))
    const call = onlyCallSince(count, { call: 'start', id: instanceWorkflowId(instance.id), workflowType: WORKFLOW_TYPES.migrate })
    assert.equal(call.options?.workflowIdConflictPolicy, 'FAIL')
    assert.deepEqual([(call.args[0] as { kind: string }).kind, (call.args[0] as { targetHostId: string }).targetHostId], ['migrate', 'host-2'])
    assert.deepEqual((await operationRow(body.operation!.id))?.params, { targetHostId: 'host-2' })

    // The migration's execution records it, as migrate.ts does.
    const db = api.database.pool
    await db.query(`INSERT INTO migrations (id, instance_id, source_vmm_id, source_host_id, phase)
      SELECT $1, id, active_vmm_id, 'host-1', 'sending' FROM instances WHERE id = $2`, [body.operation!.id, instance.id])
    count = temporal.calls.length
    const cancel = acceptedBy(await send('POST', `/v1/instances/${instance.id}/migrate/cancel`))
    assert.match(cancel.message ?? '', /cancel requested/)
    const signal = onlyCallSince(count, { call: 'signal', id: instanceWorkflowId(instance.id), signal: 'cancelMigration' })
    assert.deepEqual(signal.args, [{ migrationId: body.operation!.id, requestedBy: 'an API client (token VMPLANE_API_TOKEN)' }])

    // Its execution gone (a cancel too late), a cancel is a conflict, not a signal lost.
    temporal.release(instanceWorkflowId(instance.id))
    const late = await send('DELETE', `/v1/instances/${instance.id}/migrations/${body.operation!.id}`)
    assert.equal(late.statusCode, 409, late.body)
    assert.match(late.json().detail, new RegExp(`migration ${body.operation!.id} has ended`))
  })

  it('drains: cordons and records the drain, then starts drain-<host>, once however often asked; uncordon tells it to stop', async () => {
    let count = temporal.calls.length
    const drained = await send('POST', '/v1/hosts/host-2/drain', { concurrency: 2 })
    assert.equal(drained.statusCode, 202, drained.body)
    assert.notEqual(drained.json().cordonedAt, null)
    const db = api.database.pool
    const { rows: [drain] } = await db.query("SELECT id, status FROM drains WHERE host_id = 'host-2'")
    assert.equal(drain.status, 'draining')
    const call = onlyCallSince(count, { call: 'start', id: drainWorkflowId('host-2'), workflowType: WORKFLOW_TYPES.drain })
    assert.deepEqual(call.args, [{ hostId: 'host-2', drainId: drain.id, concurrency: 2 }])
    assert.equal(call.options?.workflowIdConflictPolicy, 'USE_EXISTING')

    // Asked again: the same drain, its workflow the one running.
    count = temporal.calls.length
    assert.equal((await send('POST', '/v1/hosts/host-2/drain', {})).statusCode, 200)
    const again = onlyCallSince(count, { call: 'start', id: drainWorkflowId('host-2') })
    assert.equal((again.args[0] as { drainId: string }).drainId, drain.id)
    assert.equal((await db.query("SELECT count(*)::int AS n FROM drains WHERE host_id = 'host-2'")).rows[0].n, 1)

    count = temporal.calls.length
    const uncordoned = await send('POST', '/v1/hosts/host-2/uncordon')
    assert.equal(uncordoned.statusCode, 200, uncordoned.body)
    assert.equal(uncordoned.json().cordonedAt, null)
    onlyCallSince(count, { call: 'signal', id: drainWorkflowId('host-2'), signal: 'stopDrain' })
  })

  it('closes a drain\'s record whose workflow is gone when uncordoned, and cordons without Temporal', async () => {
    const db = api.database.pool
    await db.query("INSERT INTO drains (id, host_id, status) VALUES (gen_random_uuid(), 'host-1', 'draining')")
    await db.query("UPDATE hosts SET cordoned_at = now(), cordon_reason = 'draining' WHERE id = 'host-1'")
    let count = temporal.calls.length
    assert.equal((await send('POST', '/v1/hosts/host-1/uncordon')).statusCode, 200)
    onlyCallSince(count, { call: 'signal', id: drainWorkflowId('host-1'), signal: 'stopDrain' })
    assert.deepEqual((await db.query("SELECT status, finished_at IS NOT NULL AS finished FROM drains WHERE host_id = 'host-1'")).rows, [{ status: 'stopped', finished: true }])

    count = temporal.calls.length
    const cordoned = await send('POST', '/v1/hosts/host-1/cordon')
    assert.equal(cordoned.statusCode, 200, cordoned.body)
    assert.notEqual(cordoned.json().cordonedAt, null)
    assert.equal(temporal.calls.length, count, 'a cordon alone asks nothing of Temporal')
    assert.equal((await send('POST', '/v1/hosts/host-1/uncordon')).json().cordonedAt, null)
    assert.equal(temporal.calls.length, count, 'nor does ending it with no drain')
  })

  it('runs a reconciler pass on demand by triggering its Schedule', async () => {
    const count = temporal.calls.length
    const response = await send('POST', '/v1/admin/reconcile')
    assert.equal(response.statusCode, 202, response.body)
    onlyCallSince(count, { call: 'trigger', id: RECONCILE_SCHEDULE_ID })
  })
})
