/**
 * Per-token rate limit (@fastify/rate-limit) inside `/v1`, after authentication: each token has
 * its own budget of requests per minute, counted in PostgreSQL (rate-limit-store.ts) so
 * that it is the deployment's budget, however many API replicas serve it. Over it, the answer is
 * 429 problem details with `Retry-After` (seconds), and the request changes nothing.
 */
import rateLimit from '@fastify/rate-limit'
import fp from 'fastify-plugin'
import { ApiProblem } from './problem-details.js'
import { postgresRateLimitStore } from './rate-limit-store.js'

const WINDOW_MS = 60_000

export default fp<{ perMinute: number }>(async (fastify, opts) => {
  await fastify.register(rateLimit, {
    max: opts.perMinute,
    timeWindow: WINDOW_MS,
    store: postgresRateLimitStore(fastify.db, WINDOW_MS),
    // A request PostgreSQL could not count goes on uncounted: if it needs PostgreSQL, it fails
    // on its own, and a counter alone is no reason to refuse it.
    skipOnError: true,
    // A route-level onRequest hook: it runs after the scope's token check, so the key is the
    // token's ID and never an unchecked header, and before an idempotent replay is served.
    hook: 'onRequest',
    keyGenerator: (request) => request.principal.tokenId,
    errorResponseBuilder: (request, context) => new ApiProblem(
      429,
      'Too Many Requests',
      `the token ${request.principal.tokenName} has made more than ${context.max} requests in a minute; retry in ${context.after}`
    )
  })
}, { name: 'rate-limit', dependencies: ['database'] })
