/**
 * The API's contract beyond the lifecycle: bad input gets a clear 4xx with problem details naming
 * what is wrong, and changes nothing; lists page with a cursor and filter by state.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

describe('the API contract', () => {
  let stack: TestStack
  let stoppedId: string
  before(async () => {
    stack = await startStack({ hosts: 1 })
    const { body } = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', { ...newInstance('taken'), start: false })
    stoppedId = body.instance.id
    await waitForState(stack, stoppedId, 'stopped')
  })
  after(async () => { await stack?.stop() })

  async function instanceCount (): Promise<number> {
    return (await api(stack).get<{ items: unknown[] }>('/v1/instances?limit=500')).body.items.length
  }

  function assertProblem (response: { status: number, headers: Headers, body: any }, status: number, detail: RegExp): void {
    assert.equal(response.status, status, JSON.stringify(response.body))
    assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/)
    assert.equal(response.body.status, status)
    assert.match(response.body.detail, detail)
  }

  it('names every invalid field of a create, and creates nothing', async () => {
    const before = await instanceCount()
    const response = await api(stack).post('/v1/instances', {
      name: 'Bad_Name', vcpus: 0, memoryMiB: 1.5, boot: { kernel: '../../etc/passwd' }, unknown: true
    })
    assertProblem(response, 400, /body\.name/)
    const paths = (response.body.errors as Array<{ path: string }>).map((e) => e.path)
    for (const path of ['body.name', 'body.vcpus', 'body.memoryMiB', 'body.boot.kernel', 'body']) assert.ok(paths.includes(path), path)
    assert.equal(await instanceCount(), before)
  })

  it('refuses values out of range and a wrong type', async () => {
    assertProblem(await api(stack).post('/v1/instances', { ...newInstance('big'), vcpus: 1000 }), 400, /body\.vcpus/)
    assertProblem(await api(stack).post('/v1/instances', { ...newInstance('big'), memoryMiB: 'lots' }), 400, /body\.memoryMiB/)
    assertProblem(await api(stack).post('/v1/instances', { ...newInstance('big'), stopGraceSeconds: -1 }), 400, /body\.stopGraceSeconds/)
  })

  it('answers 409 for a name a live instance has', async () => {
    assertProblem(await api(stack).post('/v1/instances', newInstance('taken')), 409, /taken already exists/)
  })

  it('answers 404 for an unknown instance or operation, 400 for an ID that is not one', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000'
    assertProblem(await api(stack).get(`/v1/instances/${unknown}`), 404, /does not exist/)
    assertProblem(await api(stack).post(`/v1/instances/${unknown}/start`), 404, /does not exist/)
    assertProblem(await api(stack).get(`/v1/operations/${unknown}`), 404, /does not exist/)
    assertProblem(await api(stack).get('/v1/instances/not-an-id'), 400, /params\.id/)
  })

  it('answers 409 for an operation that cannot apply, naming the state', async () => {
    assertProblem(await api(stack).post(`/v1/instances/${stoppedId}/reboot`), 409, /cannot reboot an instance that is stopped/)
  })

  it('answers a stop of a stopped instance with 200 and no operation', async () => {
    const response = await api(stack).post(`/v1/instances/${stoppedId}/stop`)
    assert.equal(response.status, 200)
    assert.equal(response.body.operation, null)
    assert.match(response.body.message, /already stopped/)
  })

  it('refuses grace periods that are negative, fractional or huge', async () => {
    for (const graceSeconds of [-1, 1.5, 100000]) {
      assertProblem(await api(stack).post(`/v1/instances/${stoppedId}/stop`, { graceSeconds }), 400, /graceSeconds/)
    }
    assertProblem(await api(stack).delete(`/v1/instances/${stoppedId}?graceSeconds=-3`), 400, /graceSeconds/)
  })

  it('requires the bearer token on /v1 and nowhere else', async () => {
    const anonymous = { apiUrl: stack.apiUrl, apiToken: '' }
    assertProblem(await api(anonymous).get('/v1/instances'), 401, /Bearer/)
    assertProblem(await api({ apiUrl: stack.apiUrl, apiToken: 'wrong-token-wrong-token' }).get('/v1/hosts'), 401, /not valid/)
    assert.equal((await api(anonymous).get('/healthz')).status, 200)
    assert.equal((await api(anonymous).get('/readyz')).status, 200)
    assert.equal((await api(anonymous).get('/openapi.json')).status, 200)
  })

  it('pages through instances with a cursor, oldest first, and filters by state', async () => {
    const names = ['page-a', 'page-b', 'page-c']
    for (const name of names) {
      const { body } = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', { ...newInstance(name), start: false })
      await waitForState(stack, body.instance.id, 'stopped')
    }
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
      const page = await api(stack).get<{ items: InstanceBody[], nextCursor: string | null }>(`/v1/instances?limit=2${query}`)
      assert.equal(page.status, 200)
      assert.ok(page.body.items.length <= 2)
      seen.push(...page.body.items.map((i) => i.name))
      cursor = page.body.nextCursor
    } while (cursor !== null)
    assert.deepEqual(seen, ['taken', ...names])
    const stopped = await api(stack).get<{ items: InstanceBody[] }>('/v1/instances?state=stopped')
    assert.ok(stopped.body.items.every((i) => i.state === 'stopped') && stopped.body.items.length >= 4)
    assert.deepEqual((await api(stack).get<{ items: unknown[] }>('/v1/instances?state=running')).body.items, [])
    assertProblem(await api(stack).get('/v1/instances?cursor=bogus'), 400, /cursor/)
    assertProblem(await api(stack).get('/v1/instances?state=sleeping'), 400, /query\.state/)
    assertProblem(await api(stack).get('/v1/instances?limit=0'), 400, /query\.limit/)
  })

  it('Idempotency-Key: a retry gets the first answer and creates nothing twice; another request with the key is 422', async () => {
    const key = { 'idempotency-key': `create-${Date.now()}` }
    const body = { ...newInstance('keyed'), start: false }
    const first = await api(stack).post<{ instance: InstanceBody, operation: { id: string } }>('/v1/instances', body, key)
    assert.equal(first.status, 202)
    const again = await api(stack).post<{ instance: InstanceBody, operation: { id: string } }>('/v1/instances', body, key)
    assert.equal(again.status, 202)
    assert.equal(again.headers.get('idempotency-replayed'), 'true')
    assert.equal(again.body.instance.id, first.body.instance.id)
    assert.equal(again.body.operation.id, first.body.operation.id)
    const named = (await api(stack).get<{ items: InstanceBody[] }>('/v1/instances?limit=500')).body.items.filter((i) => i.name === 'keyed')
    assert.equal(named.length, 1)
    assertProblem(await api(stack).post('/v1/instances', { ...body, vcpus: 2 }, key), 422, /was used for another request/)
    assertProblem(await api(stack).post('/v1/instances', body, { 'idempotency-key': 'bad key with spaces' }), 400, /idempotency-key/)

    await waitForState(stack, first.body.instance.id, 'stopped')
    const stopKey = { 'idempotency-key': `start-${Date.now()}` }
    const started = await api(stack).post(`/v1/instances/${first.body.instance.id}/start`, {}, stopKey)
    const restarted = await api(stack).post(`/v1/instances/${first.body.instance.id}/start`, {}, stopKey)
    assert.equal(started.status, 202)
    assert.deepEqual(restarted.body.operation.id, started.body.operation.id)
    await waitForState(stack, first.body.instance.id, 'running')
    assert.equal((await api(stack).delete(`/v1/instances/${first.body.instance.id}?graceSeconds=0`)).status, 202)
  })
})
