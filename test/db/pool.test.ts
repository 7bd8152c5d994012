/**
 * The pool's connections when PostgreSQL ends them (a restart; here `pg_terminate_backend`, which
 * sends the same FATAL as a fast shutdown): a connection that dies while checked out, between
 * its transaction's queries, fails that transaction's next query with an error the API answers
 * 503 for, never the process, and the pool goes on with a new one. Without the listener the pool
 * gives its clients, the error crashed the API (the cluster campaign's PostgreSQL restarts ended
 * both API replicas at once).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { isDependencyUnavailable } from '../../api/plugins/problem-details.js'
import { inTransaction } from '../../db/pool.js'
import { startDatabase, type TestDatabase } from '../helpers/database.js'

describe('the PostgreSQL pool', { timeout: 60_000 }, () => {
  let database: TestDatabase
  before(async () => { database = await startDatabase() })
  after(async () => { await database?.stop() })

  it('fails a transaction whose connection PostgreSQL ended between its queries, and goes on', async () => {
    const transaction = inTransaction(database.pool, async (tx) => {
      const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
      await database.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid])
      // The FATAL reaches this connection while none of its queries runs.
      await sleep(200)
      await tx.query('SELECT 1')
    })
    await assert.rejects(transaction, (err: Error) => isDependencyUnavailable(err) || assert.fail(`not a dependency unavailable: ${err.message}`))
    const { rows } = await database.pool.query<{ one: number }>('SELECT 1 AS one')
    assert.equal(rows[0]!.one, 1)
  })
})
