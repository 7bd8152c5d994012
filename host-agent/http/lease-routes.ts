/**
 * The agent's route for its host's lease (docs/design.md §17): a peer's question whether this host
 * holds its own (yes once held a term without a break, host-agent/lease/lease-keeper.ts). An agent
 * that keeps no lease (no watchdog configured) answers that it holds none.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { leaseStateSchema } from '../../domain/host-agent-api.js'
import type { LeaseKeeper } from '../lease/lease-keeper.js'

export interface LeaseRouteOptions {
  hostId: string
  lease: LeaseKeeper | null
}

export const leaseRoutes: FastifyPluginAsyncZod<LeaseRouteOptions> = async (app, { hostId, lease }) => {
  app.get('/v1/lease', { schema: { response: { 200: leaseStateSchema } } }, async () => {
    return { hostId, holds: lease?.answersHolding() ?? false }
  })
}
