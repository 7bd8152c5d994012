/**
 * PostgreSQL connections for the API and the worker.
 *
 * Timestamps are read as ISO strings and 64-bit integers as numbers (generations stay far below
 * 2^53), so rows map to the domain types without per-query conversions.
 */
import pg from 'pg'

const INT8_OID = 20
const TIMESTAMPTZ_OID = 1184
pg.types.setTypeParser(INT8_OID, (value) => Number.parseInt(value, 10))
pg.types.setTypeParser(TIMESTAMPTZ_OID, (value) => new Date(value).toISOString())

export type Pool = pg.Pool
export type PoolClient = pg.PoolClient
/** What a repository function runs its statements on: the pool, or a transaction's client. */
export type Queryable = Pool | PoolClient

export function createPool (databaseUrl: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, idleTimeoutMillis: 30_000 })
  // A connection that dies while idle (PostgreSQL restarted) is dropped from the pool; the
  // next query opens a new one. Without a listener the error would crash the process.
  pool.on('error', () => {})
  // One that dies while checked out, between its queries (a transaction awaiting Temporal, say),
  // has no pool listener: its error is the next query's, and the pool drops it when released.
  // The crash campaign's PostgreSQL restarts ended both API replicas at once without this.
  pool.on('connect', (client) => { client.on('error', () => {}) })
  return pool
}

/** Runs `work` in one transaction; rolls back if it throws. */
export async function inTransaction<T> (pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}
