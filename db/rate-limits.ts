/**
 * The `rate_limit_windows` table: the API's rate-limit counters, one row per key in its current
 * fixed window on PostgreSQL's clock (api/plugins/rate-limit-store.ts has the theory; written by
 * the API only, docs/design.md §9).
 */
import type { Queryable } from './pool.js'

// One statement counts the request in its key's current window, or starts a new one over the row
// of a window that has passed, and answers the count and the time left. A request from a
// transaction that began in the previous window (now() is its start) counts in the window another
// replica already moved the row to, rather than moving it back.
const COUNT = `
  WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now_ms)
  INSERT INTO rate_limit_windows AS w (key, window_start_ms, hits)
  SELECT $1, now_ms - now_ms % $2::bigint, 1 FROM clock
  ON CONFLICT (key) DO UPDATE
    SET hits = CASE WHEN EXCLUDED.window_start_ms > w.window_start_ms THEN 1 ELSE w.hits + 1 END,
        window_start_ms = GREATEST(w.window_start_ms, EXCLUDED.window_start_ms)
  RETURNING hits, window_start_ms + $2::bigint - (SELECT now_ms FROM clock) AS ttl_ms`

/** Counts a request of `key` in its window of `windowMs`: the window's count so far, and its time left. */
export async function countRequest (db: Queryable, key: string, windowMs: number): Promise<{ hits: number, ttlMs: number }> {
  const { rows: [row] } = await db.query<{ hits: number, ttl_ms: number }>(COUNT, [key, windowMs])
  return { hits: row!.hits, ttlMs: row!.ttl_ms }
}
