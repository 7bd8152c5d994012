/**
 * The agent's route contract (http/route-contract.ts). Besides what any route may answer:
 * - under `/v1`: 401 (no valid token) and 503 (the agent cannot act now, errors.ts);
 * - a `/v1` mutation: 409 (it conflicts with the VMM's record).
 * Every error is `{error, message}` as JSON (error-handler.ts).
 */
import type { RouteOptions } from 'fastify'
import { agentErrorSchema } from '../../domain/host-agent-api.js'
import { isMutation, type RouteContract } from '../../http/route-contract.js'

function errorStatuses (route: Pick<RouteOptions, 'url' | 'method'>): number[] {
  if (!route.url.startsWith('/v1/')) return []
  return [401, 503, ...(isMutation(route) ? [409] : [])]
}

export const agentRouteContract: RouteContract = {
  errorStatuses,
  error: { contentType: 'application/json', schema: agentErrorSchema },
  needsToken: (url) => url.startsWith('/v1/')
}
