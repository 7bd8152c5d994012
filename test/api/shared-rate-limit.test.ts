/**
 * The rate limit is the deployment's, not each API process's: two APIs on one PostgreSQL, as two
 * replicas are, spend from one budget per token (api/plugins/rate-limit-store.ts). Each API runs
 * in process; the requests read hosts, which needs PostgreSQL only.
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, VIEWER_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'

const LIMIT = 10
const WINDOW_MS = 60_000

describe('one rate limit across API replicas', { timeout: 2 * 60_000 }, () => {
  let first: InProcessApi
  let second: InProcessApi

  before(async () => {
    first = await startInProcessApi({ env: { VMPLANE_API_RATE_LIMIT: String(LIMIT) } })
    second = await startInProcessApi({ database: first.database, env: { VMPLANE_API_RATE_LIMIT: String(LIMIT) } })
  })
  after(async () => {
    await second?.stop()
    await first?.stop()
  })

  // Each test's requests fall in one fixed window: a fresh one, started by emptying the table, and
  // not about to end (the windows follow PostgreSQL's clock, which is this machine's).
  beforeEach(async () => {
    const left = WINDOW_MS - Date.now() % WINDOW_MS
    if (left < 10_000) await sleep(left + 100)
    await first.database.pool.query('DELETE FROM rate_limit_windows')
  })

  async function read (api: InProcessApi, token = OPERATOR_TOKEN): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method: 'GET', url: '/v1/hosts', headers: { authorization: `Bearer ${token}` } })
  }

  function assertLimited (response: LightMyRequestResponse): void {
    assert.equal(response.statusCode, 429, response.body)
    assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
    assert.match(response.json().detail, new RegExp(`the token VMPLANE_API_TOKEN has made more than ${LIMIT} requests in a minute; retry in`))
    const retryAfter = Number(response.headers['retry-after'])
    assert.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After ${String(response.headers['retry-after'])}`)
  }

  it('counts the requests made to either API against one budget', async () => {
    for (let i = 0; i < LIMIT; i++) {
      const response = await read(i % 2 === 0 ? first : second)
      assert.equal(response.statusCode, 200, `request ${i + 1}: ${response.body}`)
    }
    // Each API has served half the limit, and both now refuse.
    assertLimited(await read(first))
    assertLimited(await read(second))
    // The viewer's budget is its own.
    assert.equal((await read(second, VIEWER_TOKEN)).statusCode, 200)
  })

  it('lets exactly the limit through when both APIs are asked at once', async () => {
    const responses = await Promise.all(Array.from({ length: 3 * LIMIT }, (_, i) => read(i % 2 === 0 ? first : second)))
    const statuses = responses.map((response) => response.statusCode)
    assert.equal(statuses.filter((status) => status === 200).length, LIMIT, statuses.join(' '))
    for (const response of responses.filter((r) => r.statusCode !== 200)) assertLimited(response)
  })

  it('starts a fresh window over the row of one that has passed, keeping one row per token', async () => {
    for (let i = 0; i <= LIMIT; i++) await read(first)
    assertLimited(await read(second))
    // The window ends: what the clock would do in under a minute, done to the row.
    await first.database.pool.query('UPDATE rate_limit_windows SET window_start_ms = window_start_ms - $1', [WINDOW_MS])
    assert.equal((await read(second)).statusCode, 200)
    const { rows } = await first.database.pool.query('SELECT key, hits FROM rate_limit_windows ORDER BY key')
    assert.deepEqual(rows, [{ key: 'operator', hits: 1 }])
  })
})
