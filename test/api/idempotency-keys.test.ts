/**
 * An Idempotency-Key is bound to its request from its first claim (api/plugins/idempotency.ts):
 * every ID the request makes is derived from the key, so another request under the key would
 * find, or collide with, what the first one made. A claim whose lease lapsed (its API replica
 * died) or that a failure of ours (5xx) gave back is taken over by the same request only; another
 * request under the key is refused with 422 and changes nothing, whether or not the first is
 * still in progress.
 *
 * The API runs in process over a real PostgreSQL; the requests create networks, which needs
 * PostgreSQL only. A dead replica's claim is made as it would be left: unanswered, held by a
 * process that renews it no more, its lease over.
 */
import assert from 'node:assert/strict'
import { after, afterEach, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { whileInsertsFail } from '../helpers/database.js'

const ALPHA = { name: 'alpha', cidr: '10.10.0.0/24' }
const BETA = { name: 'beta', cidr: '10.20.0.0/24' }

describe('an Idempotency-Key, bound to its first request', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi

  before(async () => { api = await startInProcessApi() })
  after(async () => { await api?.stop() })
  afterEach(async () => { await api.database.pool.query('DELETE FROM networks') })

  async function createNetwork (key: string, body: Record<string, string>): Promise<LightMyRequestResponse> {
    return await api.server.inject({
      method: 'POST',
      url: '/v1/networks',
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'idempotency-key': key },
      payload: body
    })
  }

  /** The key's row and the networks' names: what a refused request must leave as it was. */
  async function stateOf (key: string): Promise<{ claim: string | undefined, networks: string[] }> {
    const db = api.database.pool
    const claim = await db.query<{ row: string }>('SELECT k::text AS row FROM idempotency_keys k WHERE key = $1', [key])
    const networks = await db.query<{ name: string }>('SELECT name FROM networks WHERE deleted_at IS NULL ORDER BY name')
    return { claim: claim.rows[0]?.row, networks: networks.rows.map((row) => row.name) }
  }

  /** The key's claim, unanswered, held by another API process whose lease ends `leaseSeconds` from now. */
  async function claimedElsewhere (key: string, leaseSeconds: number): Promise<void> {
    const { rowCount } = await api.database.pool.query(
      `UPDATE idempotency_keys SET status = NULL, content_type = NULL, response = NULL,
         claimed_by = gen_random_uuid(), claimed_until = now() + $2 * interval '1 second'
        WHERE key = $1`,
      [key, leaseSeconds]
    )
    assert.equal(rowCount, 1)
  }

  function assertUsedForAnother (response: LightMyRequestResponse, key: string): void {
    assert.equal(response.statusCode, 422, response.body)
    assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
    assert.match(response.json().detail, new RegExp(`Idempotency-Key ${key} was used for another request`))
  }

  function assertAlpha (response: LightMyRequestResponse): void {
    assert.equal(response.statusCode, 201, response.body)
    assert.deepEqual([response.json().name, response.json().cidr], [ALPHA.name, ALPHA.cidr])
  }

  it('lets only its own request take over a claim whose lease lapsed', async () => {
    const key = 'lapsed-claim'
    assertAlpha(await createNetwork(key, ALPHA))
    // Its replica died after making the network, before recording its answer, and its lease ran out.
    await claimedElsewhere(key, -1)
    const before = await stateOf(key)

    assertUsedForAnother(await createNetwork(key, BETA), key)
    assert.deepEqual(await stateOf(key), before, 'the other request changed nothing')

    const retried = await createNetwork(key, ALPHA)
    assertAlpha(retried)
    assert.equal(retried.headers['idempotency-replayed'], undefined, 'the request ran again')
    assert.deepEqual((await stateOf(key)).networks, [ALPHA.name])
  })

  it('refuses another request under a key whose request is still in progress with 422, not 409', async () => {
    const key = 'claim-in-progress'
    assertAlpha(await createNetwork(key, ALPHA))
    await claimedElsewhere(key, 60)
    const before = await stateOf(key)

    assertUsedForAnother(await createNetwork(key, BETA), key)
    const same = await createNetwork(key, ALPHA)
    assert.equal(same.statusCode, 409, same.body)
    assert.equal(same.headers['retry-after'], '1')
    assert.deepEqual(await stateOf(key), before, 'neither request changed anything')
  })

  it('gives a claim whose request failed (5xx) back to that request only', async () => {
    const key = 'failed-request'
    // Every network's insert fails, as a PostgreSQL out of disk space would fail it.
    const failed = await whileInsertsFail(api.database.pool, 'networks', 'could not extend file: No space left on device', async () => await createNetwork(key, ALPHA))
    assert.equal(failed.statusCode, 500, failed.body)
    const before = await stateOf(key)

    assertUsedForAnother(await createNetwork(key, BETA), key)
    assert.deepEqual(await stateOf(key), before, 'the other request changed nothing')

    // The same request may try again at once.
    assertAlpha(await createNetwork(key, ALPHA))
    assert.deepEqual((await stateOf(key)).networks, [ALPHA.name])
  })
})
