/**
 * A request that fails because PostgreSQL or Temporal cannot answer (restarting, not up yet) is
 * answered 503, the caller's to retry, not 500, a bug of ours: what the API answered while the
 * cluster campaign restarted PostgreSQL was 500, each one logged as a failed request.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import Fastify from 'fastify'
import problemDetails from '../../../api/plugins/problem-details.js'

/** Errors as pg and Temporal's client throw them when their server is away. */
const UNAVAILABLE = {
  'PostgreSQL not listening': Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
  'PostgreSQL shutting down': Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
  'PostgreSQL starting up': Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
  'a connection PostgreSQL dropped': new Error('Connection terminated unexpectedly'),
  'Temporal not listening': Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 })
}

async function answerTo (error: Error): Promise<{ status: number, body: { status: number, detail: string } }> {
  const app = Fastify({ logger: false })
  await app.register(problemDetails)
  app.get('/fails', async () => { throw error })
  const response = await app.inject({ method: 'GET', url: '/fails' })
  await app.close()
  return { status: response.statusCode, body: response.json() }
}

describe('the API when a service it depends on is unavailable', () => {
  for (const [what, error] of Object.entries(UNAVAILABLE)) {
    it(`answers 503 to ${what}`, async () => {
      const { status, body } = await answerTo(error)
      assert.equal(status, 503)
      assert.equal(body.status, 503)
      assert.match(body.detail, /retry shortly/)
    })
  }

  it('still answers 500 to anything else', async () => {
    assert.equal((await answerTo(new Error('a bug'))).status, 500)
  })
})
