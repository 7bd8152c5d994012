/**
 * The API's route contract (http/route-contract.ts). Besides what any route may answer, by
 * where each answer comes from:
 * - a route with a path parameter: 404 (no such thing) and 414 (a parameter over 100 characters);
 * - a method that may carry a body: 413 (over the limit) and 415 (not JSON);
 * - under `/v1`: 401 (no valid token), 429 (the rate limit) and 503 (a dependency unreachable);
 * - a `/v1` mutation: 403 (a viewer's token), 409 (a conflict, or its Idempotency-Key in use)
 *   and 422 (its Idempotency-Key used for another request).
 * Every error is `application/problem+json` (plugins/problem-details.ts).
 */
import type { RouteOptions } from 'fastify'
import { ANY_ROUTE_ERRORS, errorContent, takesBody, type RouteContract } from '../../http/route-contract.js'
import { problemSchema } from '../schemas/common.js'

const READ_METHODS = new Set(['GET', 'HEAD'])

function errorStatuses (route: Pick<RouteOptions, 'url' | 'method'>): number[] {
  const statuses = [...ANY_ROUTE_ERRORS]
  if (route.url.includes(':')) statuses.push(404, 414)
  if (takesBody(route)) statuses.push(413, 415)
  if (route.url.startsWith('/v1/')) {
    statuses.push(401, 429, 503)
    if ([route.method].flat().some((method) => !READ_METHODS.has(method))) statuses.push(403, 409, 422)
  }
  return statuses
}

export const apiRouteContract: RouteContract = {
  errorStatuses,
  error: { contentType: 'application/problem+json', schema: problemSchema },
  needsToken: (url) => url.startsWith('/v1/')
}

/** A problem, documented: for a route that answers one of its own beyond the contract's. */
export const problemContent = errorContent(apiRouteContract)
