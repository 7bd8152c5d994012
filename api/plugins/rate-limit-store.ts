/**
 * @fastify/rate-limit's counters in PostgreSQL (`rate_limit_windows`, db/migrations/010), so
 * every API replica spends from one budget: with the plugin's own in-memory store, N replicas
 * would let a token make N times its limit.
 *
 * Fixed windows on PostgreSQL's clock, the one clock every replica shares: each request is one
 * `INSERT … ON CONFLICT DO UPDATE … RETURNING`, which counts it in its key's current window (or
 * starts a new one over the row of a window that has passed) and answers the count and the time
 * left. A fixed window lets a token make up to twice its limit across a window's edge, as the
 * plugin's own store does; what matters here is that replicas add nothing to it.
 */
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { Pool } from '../../db/pool.js'

// A request from a transaction that began in the previous window (now() is its start) counts in
// the window another replica already moved the row to, rather than moving it back.
const COUNT = `
  WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS now_ms)
  INSERT INTO rate_limit_windows AS w (key, window_start_ms, hits)
  SELECT $1, now_ms - now_ms % $2::bigint, 1 FROM clock
  ON CONFLICT (key) DO UPDATE
    SET hits = CASE WHEN EXCLUDED.window_start_ms > w.window_start_ms THEN 1 ELSE w.hits + 1 END,
        window_start_ms = GREATEST(w.window_start_ms, EXCLUDED.window_start_ms)
  RETURNING hits, window_start_ms + $2::bigint - (SELECT now_ms FROM clock) AS ttl_ms`

/** A store class for the plugin's `store` option, counting in windows of `windowMs`. */
export function postgresRateLimitStore (pool: Pool, windowMs: number): FastifyRateLimitStoreCtor {
  // The plugin constructs it with its options, which it needs none of.
  class PostgresRateLimitStore implements FastifyRateLimitStore {
    private prefix = ''

    incr (key: string, callback: (error: Error | null, result?: { current: number, ttl: number }) => void): void {
      pool.query<{ hits: number, ttl_ms: number }>(COUNT, [this.prefix + key, windowMs]).then(
        ({ rows: [row] }) => { callback(null, { current: row!.hits, ttl: Math.max(0, row!.ttl_ms) }) },
        (error: Error) => { callback(error) }
      )
    }

    /** A route with limits of its own counts apart from the rest. */
    child (routeOptions: { method: string | string[], url: string }): FastifyRateLimitStore {
      const store = new PostgresRateLimitStore()
      store.prefix = `${this.prefix}${String(routeOptions.method)} ${routeOptions.url}: `
      return store
    }
  }
  return PostgresRateLimitStore
}
