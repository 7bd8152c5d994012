/**
 * The agent's route contract (http/route-contract.ts). Besides what any route may answer, by
 * where each answer comes from:
 * - a route with a path parameter: 404 (no such VMM or stray) and 414 (a parameter over 100 characters);
 * - a method that may carry a body: 413 (over the limit) and 415 (not JSON);
 * - under `/v1`: 401 (no valid token) and 503 (the agent cannot act now, errors.ts);
 * - a `/v1` mutation: 409 (it conflicts with the VMM's record).
 * Every error is `{error, message}` as JSON (error-handler.ts).
 */
import type { RouteOptions } from 'fastify'
import { agentErrorSchema } from '../../domain/host-agent-api.js'
import { ANY_ROUTE_ERRORS, takesBody, type RouteContract } from '../../http/route-contract.js'

function errorStatuses (route: Pick<RouteOptions, 'url' | 'method'>): number[] {
  const statuses = [...ANY_ROUTE_ERRORS]
  if (route.url.includes(':')) statuses.push(404, 414)
  if (takesBody(route)) statuses.push(413, 415)
  if (route.url.startsWith('/v1/')) {
    statuses.push(401, 503)
    if (takesBody(route)) statuses.push(409)
  }
  return statuses
}

export const agentRouteContract: RouteContract = {
  errorStatuses,
  error: { contentType: 'application/json', schema: agentErrorSchema },
  needsToken: (url) => url.startsWith('/v1/')
}
