/**
 * The API's conveniences for people and scripts: `?wait=` holds the answer until the operation
 * ends; tokens have roles (a viewer reads, an operator acts; a viewer that tries to act gets 403,
 * where a missing or wrong token gets 401: bad-input.test.ts); each token has its own rate limit,
 * answered with 429 and `Retry-After`, changing nothing; the host agents' token renews a host's lease
 * and nothing else, and nobody else renews one.
 *
 * The API runs in process over a real PostgreSQL, with a stub in Temporal's place
 * (helpers/temporal-stub.ts). The instances' executions are played by writing the rows they
 * would (helpers/played-workflows.ts): an operation's end is what wakes a held `?wait=`, by
 * PostgreSQL's NOTIFY. `?wait=` through a stack whose API replica is killed is
 * test/stack/replicas.test.ts's.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, VIEWER_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { insertHost } from '../helpers/database.js'
import type { InstanceBody } from '../helpers/instances.js'
import { endOperations, instanceWithOperation } from '../helpers/played-workflows.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

/** Low enough to reach in a test, high enough for the requests before it. */
const RATE_LIMIT = 40
const AGENT_TOKEN = 'agent-token-for-inject-tests'

function newInstance (name: string) {
  return { name, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' } }
}

describe('API conveniences', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()

  before(async () => {
    api = await startInProcessApi({ temporal, env: { VMPLANE_API_RATE_LIMIT: String(RATE_LIMIT), VMPLANE_AGENT_TOKEN: AGENT_TOKEN } })
    await insertHost(api.database.pool, 'host-1')
  })
  after(async () => { await api?.stop() })

  async function send (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = {}, token = OPERATOR_TOKEN): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method, url, headers: { authorization: `Bearer ${token}`, ...headers }, ...(payload === undefined ? {} : { payload }) })
  }

  /** Plays the execution of the instance named `name`: its operation in flight ends, leaving it `state`. */
  async function executionEnds (name: string, state: 'running' | 'stopped'): Promise<void> {
    const id = await instanceWithOperation(api.database.pool, name)
    await endOperations(api.database.pool, temporal, id, state)
  }

  it('?wait= answers 200 with the ended operation and the instance at its new state', async () => {
    const creating = send('POST', '/v1/instances?wait=25', newInstance('waited'))
    await executionEnds('waited', 'running')
    const created = await creating
    assert.equal(created.statusCode, 200, created.body)
    assert.equal(created.json().operation.status, 'succeeded')
    assert.ok(created.json().operation.finishedAt)
    assert.equal(created.json().instance.state, 'running')

    const stopping = send('POST', `/v1/instances/${created.json().instance.id}/stop?wait=25`, { graceSeconds: 0 })
    await executionEnds('waited', 'stopped')
    const stopped = await stopping
    assert.equal(stopped.statusCode, 200, stopped.body)
    assert.equal(stopped.json().operation.kind, 'stop')
    assert.equal(stopped.json().instance.state, 'stopped')
  })

  it('?wait= answers 202 with the operation still running when the time is up', async () => {
    const creating = send('POST', '/v1/instances?wait=25', newInstance('stubborn'))
    await executionEnds('stubborn', 'running')
    const created = await creating
    // Nothing ends the stop: the guest would take its whole grace period.
    const stopping = await send('POST', `/v1/instances/${created.json().instance.id}/stop?wait=2`, { graceSeconds: 20 })
    assert.equal(stopping.statusCode, 202)
    assert.equal(stopping.json().operation.kind, 'stop')
    assert.equal(stopping.json().operation.status, 'running')
    assert.equal(stopping.json().operation.finishedAt ?? null, null)
  })

  it('?wait= refuses a value out of range, naming it', async () => {
    const response = await send('POST', '/v1/instances?wait=301', newInstance('never'))
    assert.equal(response.statusCode, 400)
    assert.match(response.json().detail, /query\.wait/)
  })

  it('a retry with the same Idempotency-Key is the same request whatever it waits', async () => {
    const headers = { 'idempotency-key': 'conveniences-wait-1' }
    const waiting = send('POST', '/v1/instances?wait=25', newInstance('keyed'), headers)
    await executionEnds('keyed', 'running')
    const first = await waiting
    const again = await send('POST', '/v1/instances', newInstance('keyed'), headers)
    assert.equal(again.statusCode, first.statusCode)
    assert.equal(again.headers['idempotency-replayed'], 'true')
    assert.equal(again.json().instance.id, first.json().instance.id)
  })

  it('the same Idempotency-Key sent again while its first request is in progress is refused with 409 and Retry-After', async () => {
    const headers = { 'idempotency-key': 'conveniences-concurrent-1' }
    const body = newInstance('keyed-twice')
    // The first request is held by ?wait= until its execution ends.
    const first = send('POST', '/v1/instances?wait=25', body, headers)
    const id = await instanceWithOperation(api.database.pool, 'keyed-twice')
    const concurrent = await send('POST', '/v1/instances', body, headers)
    assert.equal(concurrent.statusCode, 409, concurrent.body)
    assert.match(concurrent.json().detail, /Idempotency-Key conveniences-concurrent-1 is still in progress/)
    assert.equal(concurrent.headers['retry-after'], '1')
    await endOperations(api.database.pool, temporal, id, 'running')
    const answered = await first
    assert.equal(answered.statusCode, 200, answered.body)
    const replayed = await send('POST', '/v1/instances', body, headers)
    assert.equal(replayed.headers['idempotency-replayed'], 'true')
    assert.equal(replayed.json().instance.id, answered.json().instance.id)
  })

  it('a viewer token reads, and is refused with 403 when it tries to change anything', async () => {
    const list = await send('GET', '/v1/instances', undefined, {}, VIEWER_TOKEN)
    assert.equal(list.statusCode, 200)
    const target = (list.json().items as InstanceBody[]).find((i) => i.name === 'waited')
    assert.ok(target)
    const count = temporal.calls.length
    for (const [method, url, payload] of [
      ['POST', '/v1/instances', newInstance('by-viewer')],
      ['POST', `/v1/instances/${target.id}/start`, undefined],
      ['DELETE', `/v1/instances/${target.id}`, undefined],
      ['POST', '/v1/admin/reconcile', undefined]
    ] as const) {
      const refused = await send(method, url, payload, {}, VIEWER_TOKEN)
      assert.equal(refused.statusCode, 403, refused.body)
      assert.match(String(refused.headers['content-type']), /^application\/problem\+json/)
      assert.match(refused.json().detail, /^the fleet-viewer token VMPLANE_API_VIEWER_TOKEN may not (change a project's resources|run the fleet): (POST|DELETE) \/v1\/.* needs a token of role /)
    }
    const after = (await send('GET', '/v1/instances', undefined, {}, VIEWER_TOKEN)).json().items as InstanceBody[]
    assert.equal(after.find((i) => i.id === target.id)?.state, 'stopped')
    assert.equal(after.some((i) => i.name === 'by-viewer'), false)
    assert.equal(temporal.calls.length, count, 'nothing was sent to Temporal')
  })

  it('the host agents\' token renews a host\'s lease, acknowledging its last grant, and may do nothing else; no other token renews one', async () => {
    const renewal = { watchdogMs: 5000, took: null }
    const first = await send('PUT', '/v1/hosts/host-1/lease', renewal, {}, AGENT_TOKEN)
    assert.equal(first.statusCode, 200, first.body)
    assert.deepEqual(Object.keys(first.json()).sort(), ['grantMaxAgeMs', 'grantedAt', 'peerAskMs', 'peers', 'termMs'])
    const second = await send('PUT', '/v1/hosts/host-1/lease', { ...renewal, took: first.json().grantedAt }, {}, AGENT_TOKEN)
    assert.equal(second.statusCode, 200, second.body)
    assert.ok(second.json().grantedAt > first.json().grantedAt)
    const held = await send('GET', '/v1/hosts/host-1')
    assert.equal(held.json().lease.state, 'held', held.body)

    assert.equal((await send('PUT', '/v1/hosts/host-9/lease', renewal, {}, AGENT_TOKEN)).statusCode, 404)
    const bad = await send('PUT', '/v1/hosts/host-1/lease', { watchdogMs: -1, took: 'yesterday' }, {}, AGENT_TOKEN)
    assert.equal(bad.statusCode, 400)
    assert.match(bad.json().detail, /watchdogMs/)
    for (const token of [OPERATOR_TOKEN, VIEWER_TOKEN]) {
      const refused = await send('PUT', '/v1/hosts/host-1/lease', renewal, {}, token)
      assert.equal(refused.statusCode, 403, refused.body)
      assert.match(refused.json().detail, /may not renew a host's lease: PUT \/v1\/hosts\/:id\/lease needs a token of role host$/)
    }
    for (const [method, url] of [['GET', '/v1/instances'], ['POST', '/v1/hosts/host-1/cordon']] as const) {
      const refused = await send(method, url, undefined, {}, AGENT_TOKEN)
      assert.equal(refused.statusCode, 403, refused.body)
      assert.match(refused.json().detail, /^the host token VMPLANE_AGENT_TOKEN may not (read a project's resources|run the fleet)/)
    }
    assert.equal((await send('GET', '/v1/hosts/host-1')).json().cordonedAt, null, 'the refused cordon changed nothing')
  })

  it('over its rate limit, a token gets 429 with Retry-After, the request changes nothing, and other tokens go on', async () => {
    // The budget's minute began with this file's first request; a burst of twice the limit
    // crosses it even if that minute ends part-way.
    let limited: { response: LightMyRequestResponse, name: string } | null = null
    for (let i = 0; i <= 2 * RATE_LIMIT && limited === null; i++) {
      const name = `burst-${i}`
      const response = await send('POST', '/v1/instances', { ...newInstance(name), start: false })
      if (response.statusCode === 429) limited = { response, name }
      else assert.equal(response.statusCode, 202, response.body)
    }
    assert.ok(limited, `no 429 within ${2 * RATE_LIMIT + 1} requests`)
    const { response, name } = limited
    assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
    assert.match(response.json().detail, new RegExp(`more than ${RATE_LIMIT} requests in a minute; retry in`))
    const retryAfter = Number(response.headers['retry-after'])
    assert.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After ${String(response.headers['retry-after'])}`)

    // The viewer's budget is its own: it still reads, and sees that the refused create made nothing.
    const listed = await send('GET', '/v1/instances?limit=500', undefined, {}, VIEWER_TOKEN)
    assert.equal(listed.statusCode, 200)
    assert.equal((listed.json().items as InstanceBody[]).some((i) => i.name === name), false, `${name} was created despite the 429`)

    // Hosts' lease renewals are counted by no rate limit: a fleet's renewals spending one budget
    // would have hosts refused their leases, and fence themselves.
    for (let i = 0; i <= 2 * RATE_LIMIT; i++) {
      const renewed = await send('PUT', '/v1/hosts/host-1/lease', { watchdogMs: 5000, took: null }, {}, AGENT_TOKEN)
      assert.equal(renewed.statusCode, 200, `renewal ${i + 1}: ${renewed.body}`)
    }
  })
})
