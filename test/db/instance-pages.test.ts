/**
 * The instance list's pages read only what they show. Destroyed instances stay in their table
 * for good (their events and operations are still read), so a page that stepped over them would
 * cost more with every delete ever made. Counted here by PostgreSQL itself: the rows of
 * `instances` a page's transaction read, by any scan (`pg_stat_xact_user_tables`). The planner
 * may add one: to estimate `seq > $n`, it reads the index's last row (PostgreSQL's
 * `get_actual_variable_range`).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { instanceViewRowsAfter } from '../../db/instance-views.js'
import { DEFAULT_PROJECT_ID } from '../../domain/projects.js'
import { startDatabase, type TestDatabase } from '../helpers/database.js'
import { insertBareInstances } from '../helpers/instance-rows.js'

const DESTROYED = 2_000
const LIVE = 150
const PAGE = 100
/** The planner's read of the index's end. */
const PLANNER_PROBE = 1

describe('pages of the instance list', { timeout: 60_000 }, () => {
  let database: TestDatabase
  before(async () => {
    database = await startDatabase()
    // The destroyed ones first, so they lie ahead of every live one in insertion order.
    await insertBareInstances(database.pool, { prefix: 'gone-', count: DESTROYED, destroyed: true })
    await insertBareInstances(database.pool, { prefix: 'live-', count: LIVE })
    await database.pool.query('ANALYZE instances')
  })
  after(async () => { await database?.stop() })

  /** The page, and how many rows of `instances` reading it took. */
  async function readPage (state: 'stopped' | null, afterSeq: number): Promise<{ names: string[], rowsRead: number }> {
    const client = await database.pool.connect()
    try {
      // The counts include what this connection read before and has not yet reported: a difference.
      const rowsReadSoFar = async (): Promise<number> => {
        const { rows: [stats] } = await client.query<{ read: string }>(
          'SELECT seq_tup_read + COALESCE(idx_tup_fetch, 0) AS read FROM pg_stat_xact_user_tables WHERE relname = \'instances\''
        )
        return Number(stats!.read)
      }
      await client.query('BEGIN')
      const before = await rowsReadSoFar()
      const rows = await instanceViewRowsAfter(client, { projectId: DEFAULT_PROJECT_ID, state, afterSeq, limit: PAGE })
      const rowsRead = await rowsReadSoFar() - before
      await client.query('COMMIT')
      return { names: rows.map((row) => row.name), rowsRead }
    } finally {
      client.release()
    }
  }

  it('reads no destroyed row for a page of the instances not destroyed, first page or later', async () => {
    const first = await readPage(null, 0)
    assert.deepEqual(first.names, Array.from({ length: PAGE }, (_, n) => `live-${n + 1}`))
    assert.ok(first.rowsRead <= PAGE + PLANNER_PROBE, `the first page read ${first.rowsRead} rows of instances for its ${PAGE}`)

    const { rows: [last] } = await database.pool.query<{ seq: string }>('SELECT seq FROM instances WHERE name = $1', [`live-${PAGE}`])
    const second = await readPage(null, Number(last!.seq))
    assert.deepEqual(second.names, Array.from({ length: LIVE - PAGE }, (_, n) => `live-${PAGE + n + 1}`))
    assert.ok(second.rowsRead <= LIVE - PAGE + PLANNER_PROBE, `the second page read ${second.rowsRead} rows of instances for its ${LIVE - PAGE}`)
  })

  it('reads only rows in the state asked for', async () => {
    const page = await readPage('stopped', 0)
    assert.equal(page.names.length, PAGE)
    assert.ok(page.rowsRead <= PAGE + PLANNER_PROBE, `the page read ${page.rowsRead} rows of instances for its ${PAGE}`)
  })
})
