/**
 * Per-token rate limit (@fastify/rate-limit) inside `/v1`, after authentication: each role's
 * token has its own budget of requests per minute. Over it, the answer is 429 problem details
 * with `Retry-After` (seconds), and the request changes nothing.
 */
import rateLimit from '@fastify/rate-limit'
import fp from 'fastify-plugin'
import { ApiProblem } from './problem-details.js'

export default fp<{ perMinute: number }>(async (fastify, opts) => {
  await fastify.register(rateLimit, {
    max: opts.perMinute,
    timeWindow: 60_000,
    // A route-level onRequest hook: it runs after the scope's token check, so the key is the
    // token's role and never an unchecked header, and before an idempotent replay is served.
    hook: 'onRequest',
    keyGenerator: (request) => request.role,
    errorResponseBuilder: (request, context) => new ApiProblem(
      429,
      'Too Many Requests',
      `the ${request.role} token has made more than ${context.max} requests in a minute; retry in ${context.after}`
    )
  })
}, { name: 'rate-limit' })
