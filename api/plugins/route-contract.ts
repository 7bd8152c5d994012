/**
 * The API's route contract (http/route-contract.ts). Besides what any route may answer:
 * - under `/v1`: 401 (no valid token), 403 (a token whose role may not), 429 (the rate limit) and
 *   503 (a dependency unreachable);
 * - a project's route: 404 (the project does not exist, or is not the token's);
 * - a `/v1` mutation: 409 (a conflict, or its Idempotency-Key in use) and 422 (its
 *   Idempotency-Key used for another request).
 * Every error is `application/problem+json` (plugins/problem-details.ts).
 */
import type { RouteOptions } from 'fastify'
import { isProjectAction } from '../../domain/access-policy.js'
import { errorContent, isMutation, type RouteContract } from '../../http/route-contract.js'
import { problemSchema } from '../schemas/common.js'

function errorStatuses (route: Pick<RouteOptions, 'url' | 'method' | 'config'>): number[] {
  if (!route.url.startsWith('/v1/')) return []
  const action = route.config?.action
  return [401, 403, 429, 503, ...(action !== undefined && isProjectAction(action) ? [404] : []), ...(isMutation(route) ? [409, 422] : [])]
}

export const apiRouteContract: RouteContract = {
  errorStatuses,
  error: { contentType: 'application/problem+json', schema: problemSchema },
  needsToken: (url) => url.startsWith('/v1/')
}

/** A problem, documented: for a route that answers one of its own beyond the contract's. */
export const problemContent = errorContent(apiRouteContract)
