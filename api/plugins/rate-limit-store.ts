/**
 * @fastify/rate-limit's counters in PostgreSQL (`rate_limit_windows`, db/migrations/010), so
 * every API replica spends from one budget: with the plugin's own in-memory store, N replicas
 * would let a token make N times its limit.
 *
 * Fixed windows on PostgreSQL's clock, the one clock every replica shares: each request is one
 * `INSERT … ON CONFLICT DO UPDATE … RETURNING`, which counts it in its key's current window (or
 * starts a new one over the row of a window that has passed) and answers the count and the time
 * left. A fixed window lets a token make up to twice its limit across a window's edge, as the
 * plugin's own store does; what matters here is that replicas add nothing to it. The statement
 * is db/rate-limits.ts's.
 */
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { Pool } from '../../db/pool.js'
import { countRequest } from '../../db/rate-limits.js'

/** A store class for the plugin's `store` option, counting in windows of `windowMs`. */
export function postgresRateLimitStore (pool: Pool, windowMs: number): FastifyRateLimitStoreCtor {
  // The plugin constructs it with its options, which it needs none of.
  class PostgresRateLimitStore implements FastifyRateLimitStore {
    private prefix = ''

    incr (key: string, callback: (error: Error | null, result?: { current: number, ttl: number }) => void): void {
      countRequest(pool, this.prefix + key, windowMs).then(
        ({ hits, ttlMs }) => { callback(null, { current: hits, ttl: Math.max(0, ttlMs) }) },
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
