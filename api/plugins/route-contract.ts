/**
 * What every route promises beyond what it declares, written into its schema as it is added.
 *
 * A route that reads no query refuses one (`?bogus=1` is a 400, as on routes that read some), so
 * that a misspelt parameter is never silently ignored.
 *
 * A route may answer problems besides its own successes; they are listed in its schema, so that
 * `/openapi.json` has every status the API can give and the serializer checks every problem body
 * against the document. Routes declare only what is theirs: their successes.
 *
 * The rules follow where each answer comes from:
 * - any route: 400 (a malformed URL or request), 408, 431 (Node's HTTP layer) and 500 (a bug);
 * - a route with a path parameter: 404 (no such thing) and 414 (a parameter over 100 characters);
 * - a method that may carry a body: 413 (over the limit) and 415 (not JSON);
 * - under `/v1`: 401 (no valid token), 429 (the rate limit) and 503 (a dependency unreachable),
 *   and the bearer token in the document's security;
 * - a `/v1` mutation: 403 (a viewer's token), 409 (a conflict, or its Idempotency-Key in use)
 *   and 422 (its Idempotency-Key used for another request).
 */
import type { RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { z } from 'zod'
import { problemSchema } from '../schemas/common.js'

const READ_METHODS = new Set(['GET', 'HEAD'])
const BODYLESS_METHODS = new Set(['GET', 'HEAD'])

/** The problem statuses a route may answer, by the rules above. */
export function problemStatuses (route: Pick<RouteOptions, 'url' | 'method'>): number[] {
  const methods = [route.method].flat()
  const statuses = [400, 408, 431, 500]
  if (route.url.includes(':')) statuses.push(404, 414)
  if (methods.some((method) => !BODYLESS_METHODS.has(method))) statuses.push(413, 415)
  if (route.url.startsWith('/v1/')) {
    statuses.push(401, 429, 503)
    if (methods.some((method) => !READ_METHODS.has(method))) statuses.push(403, 409, 422)
  }
  return statuses.sort((a, b) => a - b)
}

/** `application/problem+json`, the type every problem is sent as (plugins/problem-details.ts). */
export const problemContent = { content: { 'application/problem+json': { schema: problemSchema } } }

export default fp(async (fastify) => {
  fastify.addHook('onRoute', (route) => {
    if (route.schema === undefined || route.schema.hide === true) return
    const problems = Object.fromEntries(problemStatuses(route).map((status) => [status, problemContent]))
    const response = (route.schema.response ?? {}) as Record<string, unknown>
    route.schema.response = { ...problems, ...response }
    route.schema.security = route.url.startsWith('/v1/') ? [{ bearer: [] }] : []
    route.schema.querystring ??= z.strictObject({})
  })
}, { name: 'route-contract' })
