/**
 * `/v1/hosts`: the hypervisor hosts, their status and capacity; cordon, drain and uncordon; and,
 * for the hosts' agents alone, the renewal of a host's lease.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { leaseGrantSchema, leaseRenewalSchema } from '../../domain/host-lease-api.js'
import type { LeaseSettings } from '../../domain/host-lease.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders } from '../schemas/common.js'
import { hostListSchema, hostParamsSchema, hostSchema } from '../schemas/hosts.js'
import { createHostDrains } from '../services/host-drains.js'
import { renewHostLease } from '../services/host-lease-renewals.js'

const tags = ['hosts']

const drainBody = z.strictObject({
  concurrency: z.number().int().min(1).max(20).default(3).describe('migrations in flight at once')
}).nullish()

const routes: FastifyPluginAsyncZod<{ lease: LeaseSettings }> = async (fastify, opts) => {
  const drains = createHostDrains({ db: fastify.db, temporal: fastify.temporal, taskQueue: fastify.temporalConfig.taskQueue })

  async function host (id: string) {
    const found = await fastify.instancesRepository.findHost(id)
    if (found === null) throw new ApiProblem(404, 'Not Found', `host ${id} does not exist`)
    return found
  }

  fastify.get('/hosts', {
    config: { action: 'fleet.read' },
    schema: { tags, summary: 'List hosts, with their cordon and latest drain', response: { 200: hostListSchema } }
  }, async () => ({ items: await fastify.instancesRepository.listHosts() }))

  fastify.get('/hosts/:id', {
    config: { action: 'fleet.read' },
    schema: { tags, summary: 'Get a host', params: hostParamsSchema, response: { 200: hostSchema } }
  }, async (request) => await host(request.params.id))

  fastify.post('/hosts/:id/drain', {
    config: { action: 'fleet.write' },
    schema: {
      tags,
      summary: 'Cordon the host, then live-migrate every instance running on it to other hosts, a few at a time',
      headers: idempotencyHeaders,
      params: hostParamsSchema,
      body: drainBody,
      response: { 200: hostSchema, 202: hostSchema }
    }
  }, async (request, reply) => {
    const began = await drains.drain(request.params.id, request.body?.concurrency ?? 3, request.newId)
    return await reply.code(began ? 202 : 200).send(await host(request.params.id))
  })

  fastify.post('/hosts/:id/cordon', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: 'Cordon the host: no new VMM is placed on it; what runs there stays', params: hostParamsSchema, response: { 200: hostSchema } }
  }, async (request) => {
    await drains.cordon(request.params.id)
    return await host(request.params.id)
  })

  fastify.post('/hosts/:id/uncordon', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: 'End the cordon: the host takes new VMMs again, and a drain in progress stops', params: hostParamsSchema, response: { 200: hostSchema } }
  }, async (request) => {
    await drains.uncordon(request.params.id)
    return await host(request.params.id)
  })

  fastify.put('/hosts/:id/lease', {
    // No rate limit: every host renews every 2 s, and a renewal refused for a budget would have a
    // healthy host fence itself. Not in the audit trail either: it would bury what people did.
    config: { action: 'lease.renew', rateLimit: false, audited: false },
    schema: {
      tags,
      summary: "Renew the host's lease: its agent's call, with the agents' token (docs/design.md §17)",
      params: hostParamsSchema,
      body: leaseRenewalSchema,
      response: { 200: leaseGrantSchema }
    }
  }, async (request) => {
    const grant = await renewHostLease(fastify.db, request.params.id, request.body, opts.lease)
    if (grant === null) throw new ApiProblem(404, 'Not Found', `host ${request.params.id} is not registered: its first heartbeat registers it`)
    return grant
  })
}

export default routes
