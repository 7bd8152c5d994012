/**
 * The API's conveniences for people and scripts: `?wait=` holds the answer until the operation
 * ends; tokens have roles (a viewer reads, an operator acts; a viewer that tries to act gets 403,
 * where a missing or wrong token gets 401: bad-input.test.ts); each token has its own rate limit, answered with 429 and `Retry-After`, changing nothing.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { newInstance, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type ApiResponse, type TestStack } from '../helpers/stack.js'

/** Low enough to reach in a test, high enough for the requests before it. */
const RATE_LIMIT = 40

interface Accepted {
  instance: InstanceBody
  operation: { id: string, kind: string, status: string, finishedAt?: string | null }
}

describe('API conveniences', () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 1, env: { VMPLANE_API_RATE_LIMIT: String(RATE_LIMIT) } }) })
  after(async () => { await stack?.stop() })

  const viewer = () => api({ apiUrl: stack.info.apiUrl, apiToken: stack.info.viewerToken })

  it('?wait= answers 200 with the ended operation and the instance at its new state', async () => {
    const created = await api(stack).post<Accepted>('/v1/instances?wait=25', newInstance('waited'))
    assert.equal(created.status, 200, JSON.stringify(created.body))
    assert.equal(created.body.operation.status, 'succeeded')
    assert.ok(created.body.operation.finishedAt)
    assert.equal(created.body.instance.state, 'running')

    const stopped = await api(stack).post<Accepted>(`/v1/instances/${created.body.instance.id}/stop?wait=25`, { graceSeconds: 0 })
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body))
    assert.equal(stopped.body.operation.kind, 'stop')
    assert.equal(stopped.body.instance.state, 'stopped')
  })

  it('?wait= answers 202 with the operation still running when the time is up', async () => {
    // The simulated guest ignores the power button, so this stop lasts its whole grace period.
    const created = await api(stack).post<Accepted>('/v1/instances?wait=25', newInstance('stubborn', 'sim.ignore_power_button'))
    assert.equal(created.body.instance.state, 'running')
    const stopping = await api(stack).post<Accepted>(`/v1/instances/${created.body.instance.id}/stop?wait=2`, { graceSeconds: 20 })
    assert.equal(stopping.status, 202)
    assert.equal(stopping.body.operation.kind, 'stop')
    assert.equal(stopping.body.operation.status, 'running')
    assert.equal(stopping.body.operation.finishedAt ?? null, null)
    const deleted = await api(stack).request<Accepted>('DELETE', `/v1/instances/${created.body.instance.id}?graceSeconds=0&wait=25`)
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body))
    assert.equal(deleted.body.instance.state, 'destroyed')
  })

  it('?wait= refuses a value out of range, naming it', async () => {
    const response = await api(stack).post('/v1/instances?wait=301', newInstance('never'))
    assert.equal(response.status, 400)
    assert.match(response.body.detail, /query\.wait/)
  })

  it('a retry with the same Idempotency-Key is the same request whatever it waits', async () => {
    const headers = { 'idempotency-key': 'conveniences-wait-1' }
    const first = await api(stack).post<Accepted>('/v1/instances?wait=25', newInstance('keyed'), headers)
    const again = await api(stack).post<Accepted>('/v1/instances', newInstance('keyed'), headers)
    assert.equal(again.status, first.status)
    assert.equal(again.headers.get('idempotency-replayed'), 'true')
    assert.equal(again.body.instance.id, first.body.instance.id)
  })

  it('the same Idempotency-Key sent again while its first request is in progress is refused with 409 and Retry-After', async () => {
    const headers = { 'idempotency-key': 'conveniences-concurrent-1' }
    // The guest takes 3 s to boot, so the first request is held that long by ?wait=.
    const body = newInstance('keyed-twice', 'sim.boot_ms=3000')
    const first = api(stack).post<Accepted>('/v1/instances?wait=25', body, headers)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const concurrent = await api(stack).post('/v1/instances', body, headers)
    assert.equal(concurrent.status, 409, JSON.stringify(concurrent.body))
    assert.match(concurrent.body.detail, /Idempotency-Key conveniences-concurrent-1 is still in progress/)
    assert.equal(concurrent.headers.get('retry-after'), '1')
    const answered = await first
    assert.equal(answered.status, 200, JSON.stringify(answered.body))
    const replayed = await api(stack).post<Accepted>('/v1/instances', body, headers)
    assert.equal(replayed.headers.get('idempotency-replayed'), 'true')
    assert.equal(replayed.body.instance.id, answered.body.instance.id)
  })

  it('a viewer token reads, and is refused with 403 when it tries to change anything', async () => {
    const list = await viewer().get<{ items: InstanceBody[] }>('/v1/instances')
    assert.equal(list.status, 200)
    const target = list.body.items.find((i) => i.name === 'waited')
    assert.ok(target)
    for (const attempt of [
      () => viewer().post('/v1/instances', newInstance('by-viewer')),
      () => viewer().post(`/v1/instances/${target.id}/start`),
      () => viewer().delete(`/v1/instances/${target.id}`),
      () => viewer().post('/v1/admin/reconcile')
    ]) {
      const refused = await attempt()
      assert.equal(refused.status, 403, JSON.stringify(refused.body))
      assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/)
      assert.match(refused.body.detail, /viewer token may only read; (POST|DELETE) \/v1\/.* needs an operator token/)
    }
    const after = await viewer().get<{ items: InstanceBody[] }>('/v1/instances')
    assert.equal(after.body.items.find((i) => i.id === target.id)?.state, 'stopped')
    assert.equal(after.body.items.some((i) => i.name === 'by-viewer'), false)
  })

  it('over its rate limit, a token gets 429 with Retry-After, the request changes nothing, and other tokens go on', async () => {
    // The budget's minute began with this file's first request; a burst of twice the limit
    // crosses it even if that minute ends part-way.
    let limited: { response: ApiResponse<any>, name: string } | null = null
    for (let i = 0; i <= 2 * RATE_LIMIT && limited === null; i++) {
      const name = `burst-${i}`
      const response = await api(stack).post('/v1/instances', { ...newInstance(name), start: false })
      if (response.status === 429) limited = { response, name }
      else assert.equal(response.status, 202, JSON.stringify(response.body))
    }
    assert.ok(limited, `no 429 within ${2 * RATE_LIMIT + 1} requests`)
    const { response, name } = limited
    assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/)
    assert.match(response.body.detail, new RegExp(`more than ${RATE_LIMIT} requests in a minute; retry in`))
    const retryAfter = Number(response.headers.get('retry-after'))
    assert.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After ${response.headers.get('retry-after')}`)

    // The viewer's budget is its own: it still reads, and sees that the refused create made nothing.
    const listed = await viewer().get<{ items: InstanceBody[] }>('/v1/instances?limit=500')
    assert.equal(listed.status, 200)
    assert.equal(listed.body.items.some((i) => i.name === name), false, `${name} was created despite the 429`)
  })
})
