/**
 * API reads against a large table: 10,000 stopped instances are written straight into
 * PostgreSQL (test/helpers/instance-rows.ts), then every page of `GET /v1/instances?limit=100` is read in
 * order, a few times over, and `GET /v1/instances/:id` for instances picked at random. One
 * request at a time, so each is timed alone. The rows are removed afterwards.
 */
import { api } from '../test/helpers/launcher.js'
import { insertBareInstances } from '../test/helpers/instance-rows.js'
import { createPool } from '../db/pool.js'
import { percentile, round } from './stats.js'

const NAME_PREFIX = 'bench-reads-'

export interface ReadFigures {
  rows: number
  list: { requests: number, p50Ms: number, p99Ms: number }
  get: { requests: number, p50Ms: number, p99Ms: number }
}

export async function measureApiReads (
  stack: { apiUrl: string, apiToken: string, databaseUrl: string },
  options: { rows: number, listRounds: number, gets: number }
): Promise<ReadFigures> {
  const pool = createPool(stack.databaseUrl, 1)
  try {
    const ids = await insertBareInstances(pool, { prefix: NAME_PREFIX, count: options.rows })
    await pool.query('ANALYZE instances')
    const client = api(stack)
    const timed = async (path: string, into: number[]): Promise<any> => {
      const at = performance.now()
      const { status, body } = await client.get(path)
      into.push(performance.now() - at)
      if (status !== 200) throw new Error(`GET ${path}: ${status} ${JSON.stringify(body)}`)
      return body
    }

    const listMs: number[] = []
    for (let round = 0; round < options.listRounds; round++) {
      let cursor: string | null = null
      do {
        const page: { nextCursor: string | null } = await timed(`/v1/instances?limit=100${cursor === null ? '' : `&cursor=${cursor}`}`, listMs)
        cursor = page.nextCursor
      } while (cursor !== null)
    }
    const getMs: number[] = []
    for (let i = 0; i < options.gets; i++) await timed(`/v1/instances/${ids[Math.floor(Math.random() * ids.length)]}`, getMs)

    await pool.query('DELETE FROM instances WHERE id = ANY($1::uuid[])', [ids])
    return { rows: options.rows, list: summary(listMs), get: summary(getMs) }
  } finally {
    await pool.end()
  }
}

function summary (samples: number[]): { requests: number, p50Ms: number, p99Ms: number } {
  return { requests: samples.length, p50Ms: round(percentile(samples, 50)), p99Ms: round(percentile(samples, 99)) }
}
