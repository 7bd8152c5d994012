/**
 * The API's contract beyond the lifecycle: bad input gets a clear 4xx with problem details naming
 * what is wrong, and changes nothing; lists page with a cursor and filter by state; a request
 * retried with its Idempotency-Key is answered as the first time.
 *
 * The API runs in process over a real PostgreSQL, with a stub in Temporal's place
 * (helpers/temporal-stub.ts); the instances' executions are played by writing the rows they
 * would (helpers/played-workflows.ts).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import type { InstanceBody } from '../helpers/instances.js'
import { endOperations } from '../helpers/played-workflows.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

function newInstance (name: string) {
  return { name, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux', initramfs: 'initrd.img', cmdline: 'console=ttyS0' } }
}

describe('the API contract', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()
  let stoppedId: string

  before(async () => {
    api = await startInProcessApi({ temporal })
    stoppedId = await stoppedInstance('taken')
  })
  after(async () => { await api?.stop() })

  async function send (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = { authorization: `Bearer ${OPERATOR_TOKEN}` }): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) })
  }

  /** An instance created without starting, its create ended as its execution would end it: its ID. */
  async function stoppedInstance (name: string): Promise<string> {
    const created = await send('POST', '/v1/instances', { ...newInstance(name), start: false })
    assert.equal(created.statusCode, 202, created.body)
    const id = created.json().instance.id as string
    await endOperations(api.database.pool, temporal, id, 'stopped')
    return id
  }

  async function instanceCount (): Promise<number> {
    return (await send('GET', '/v1/instances?limit=500')).json().items.length
  }

  function assertProblem (response: LightMyRequestResponse, status: number, detail: RegExp): void {
    assert.equal(response.statusCode, status, response.body)
    assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
    assert.equal(response.json().status, status)
    assert.match(response.json().detail, detail)
  }

  it('names every invalid field of a create, and creates nothing', async () => {
    const before = await instanceCount()
    const response = await send('POST', '/v1/instances', {
      name: 'Bad_Name', vcpus: 0, memoryMiB: 1.5, boot: { kernel: '../../etc/passwd' }, unknown: true
    })
    assertProblem(response, 400, /body\.name/)
    const paths = (response.json().errors as Array<{ path: string }>).map((e) => e.path)
    for (const path of ['body.name', 'body.vcpus', 'body.memoryMiB', 'body.boot.kernel', 'body']) assert.ok(paths.includes(path), path)
    assert.equal(await instanceCount(), before)
  })

  it('refuses values out of range and a wrong type', async () => {
    assertProblem(await send('POST', '/v1/instances', { ...newInstance('big'), vcpus: 1000 }), 400, /body\.vcpus/)
    assertProblem(await send('POST', '/v1/instances', { ...newInstance('big'), memoryMiB: 'lots' }), 400, /body\.memoryMiB/)
    assertProblem(await send('POST', '/v1/instances', { ...newInstance('big'), stopGraceSeconds: -1 }), 400, /body\.stopGraceSeconds/)
  })

  it('answers 409 for a name a live instance has', async () => {
    assertProblem(await send('POST', '/v1/instances', newInstance('taken')), 409, /taken already exists/)
  })

  it('answers 404 for an unknown instance or operation, 400 for an ID that is not one', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000'
    assertProblem(await send('GET', `/v1/instances/${unknown}`), 404, /does not exist/)
    assertProblem(await send('POST', `/v1/instances/${unknown}/start`), 404, /does not exist/)
    assertProblem(await send('GET', `/v1/operations/${unknown}`), 404, /does not exist/)
    assertProblem(await send('GET', '/v1/instances/not-an-id'), 400, /params\.id/)
  })

  it('answers 409 for an operation that cannot apply, naming the state', async () => {
    assertProblem(await send('POST', `/v1/instances/${stoppedId}/reboot`), 409, /cannot reboot an instance that is stopped/)
  })

  it('answers a stop of a stopped instance with 200 and no operation, sending Temporal nothing', async () => {
    const count = temporal.calls.length
    const response = await send('POST', `/v1/instances/${stoppedId}/stop`)
    assert.equal(response.statusCode, 200)
    assert.equal(response.json().operation, null)
    assert.match(response.json().message, /already stopped/)
    assert.equal(temporal.calls.length, count)
  })

  it('refuses grace periods that are negative, fractional or huge', async () => {
    for (const graceSeconds of [-1, 1.5, 100000]) {
      assertProblem(await send('POST', `/v1/instances/${stoppedId}/stop`, { graceSeconds }), 400, /graceSeconds/)
    }
    assertProblem(await send('DELETE', `/v1/instances/${stoppedId}?graceSeconds=-3`), 400, /graceSeconds/)
  })

  it('requires the bearer token on /v1 and nowhere else', async () => {
    assertProblem(await send('GET', '/v1/instances', undefined, {}), 401, /Bearer/)
    assertProblem(await send('GET', '/v1/hosts', undefined, { authorization: 'Bearer wrong-token-wrong-token' }), 401, /not valid/)
    assert.equal((await send('GET', '/healthz', undefined, {})).statusCode, 200)
    assert.equal((await send('GET', '/readyz', undefined, {})).statusCode, 200)
    assert.equal((await send('GET', '/openapi.json', undefined, {})).statusCode, 200)
  })

  it('pages through instances with a cursor, oldest first, and filters by state', async () => {
    const names = ['page-a', 'page-b', 'page-c']
    for (const name of names) await stoppedInstance(name)
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
      const page = await send('GET', `/v1/instances?limit=2${query}`)
      assert.equal(page.statusCode, 200)
      const body = page.json() as { items: InstanceBody[], nextCursor: string | null }
      assert.ok(body.items.length <= 2)
      seen.push(...body.items.map((i) => i.name))
      cursor = body.nextCursor
    } while (cursor !== null)
    assert.deepEqual(seen, ['taken', ...names])
    const stopped = (await send('GET', '/v1/instances?state=stopped')).json() as { items: InstanceBody[] }
    assert.ok(stopped.items.every((i) => i.state === 'stopped') && stopped.items.length >= 4)
    assert.deepEqual((await send('GET', '/v1/instances?state=running')).json().items, [])
    assertProblem(await send('GET', '/v1/instances?cursor=bogus'), 400, /cursor/)
    assertProblem(await send('GET', '/v1/instances?state=sleeping'), 400, /query\.state/)
    assertProblem(await send('GET', '/v1/instances?limit=0'), 400, /query\.limit/)
  })

  it('Idempotency-Key: a retry gets the first answer and creates nothing twice; another request with the key is 422', async () => {
    const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }
    const key = { ...auth, 'idempotency-key': `create-${Date.now()}` }
    const body = { ...newInstance('keyed'), start: false }
    const first = await send('POST', '/v1/instances', body, key)
    assert.equal(first.statusCode, 202)
    const again = await send('POST', '/v1/instances', body, key)
    assert.equal(again.statusCode, 202)
    assert.equal(again.headers['idempotency-replayed'], 'true')
    assert.equal(again.json().instance.id, first.json().instance.id)
    assert.equal(again.json().operation.id, first.json().operation.id)
    const named = ((await send('GET', '/v1/instances?limit=500')).json().items as InstanceBody[]).filter((i) => i.name === 'keyed')
    assert.equal(named.length, 1)
    assertProblem(await send('POST', '/v1/instances', { ...body, vcpus: 2 }, key), 422, /was used for another request/)
    assertProblem(await send('POST', '/v1/instances', body, { ...auth, 'idempotency-key': 'bad key with spaces' }), 400, /idempotency-key/)

    await endOperations(api.database.pool, temporal, first.json().instance.id, 'stopped')
    const startKey = { ...auth, 'idempotency-key': `start-${Date.now()}` }
    const started = await send('POST', `/v1/instances/${first.json().instance.id}/start`, {}, startKey)
    const restarted = await send('POST', `/v1/instances/${first.json().instance.id}/start`, {}, startKey)
    assert.equal(started.statusCode, 202)
    assert.deepEqual(restarted.json().operation.id, started.json().operation.id)
    assert.equal(temporal.calls.filter((c) => c.workflowType === 'startInstance').length, 1, 'the retry started nothing')
  })
})
