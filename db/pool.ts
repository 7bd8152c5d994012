/**
 * PostgreSQL connections for the API and the worker.
 *
 * Timestamps are read as ISO strings and 64-bit integers as numbers (generations stay far below
 * 2^53), so rows map to the domain types without per-query conversions.
 *
 * Every statement with parameters is prepared once per connection and executed by name after
 * that: PostgreSQL then parses and plans it once, not at each execution (an unnamed statement is
 * parsed and planned every time it runs). A create runs about fifty statements, most of them
 * the same few on the same key, and parsing and planning them was most of PostgreSQL's CPU per
 * create. The name is the text's digest, so one text has one name and the set of names is the
 * set of statements in db/ (none is built from data; their values are parameters).
 */
import { createHash } from 'node:crypto'
import pg from 'pg'

const INT8_OID = 20
const TIMESTAMPTZ_OID = 1184
pg.types.setTypeParser(INT8_OID, (value) => Number.parseInt(value, 10))
pg.types.setTypeParser(TIMESTAMPTZ_OID, (value) => new Date(value).toISOString())

export type Pool = pg.Pool
export type PoolClient = pg.PoolClient
/** What a repository function runs its statements on: the pool, a transaction's client, or a client of its own (the tests' checks). */
export type Queryable = Pool | pg.ClientBase

/** A client that names each statement with parameters after its text, so it is prepared once. */
class PreparingClient extends pg.Client {
  override query (...args: any[]): any {
    const [text, values] = args
    if (typeof text === 'string' && Array.isArray(values)) args[0] = { name: statementName(text), text }
    return (super.query as (...a: any[]) => any)(...args)
  }
}

const statementNames = new Map<string, string>()

function statementName (text: string): string {
  let name = statementNames.get(text)
  if (name === undefined) {
    name = `vmp_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`
    statementNames.set(text, name)
  }
  return name
}

export function createPool (databaseUrl: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, idleTimeoutMillis: 30_000, Client: PreparingClient })
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
