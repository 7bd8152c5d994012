/** `/v1/hosts`: the hypervisor hosts, their status and capacity; cordon, drain and uncordon. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders } from '../schemas/common.js'
import { hostListSchema, hostParamsSchema, hostSchema } from '../schemas/hosts.js'
import { createHostDrains } from '../services/host-drains.js'

const tags = ['hosts']

const drainBody = z.strictObject({
  concurrency: z.number().int().min(1).max(20).default(3).describe('migrations in flight at once')
}).nullish()

const routes: FastifyPluginAsyncZod = async (fastify) => {
  const drains = createHostDrains({ db: fastify.db, temporal: fastify.temporal, taskQueue: fastify.temporalConfig.taskQueue })

  async function host (id: string) {
    const found = await fastify.instancesRepository.findHost(id)
    if (found === null) throw new ApiProblem(404, 'Not Found', `host ${id} does not exist`)
    return found
  }

  fastify.get('/hosts', {
    schema: { tags, summary: 'List hosts, with their cordon and latest drain', response: { 200: hostListSchema } }
  }, async () => ({ items: await fastify.instancesRepository.listHosts() }))

  fastify.get('/hosts/:id', {
    schema: { tags, summary: 'Get a host', params: hostParamsSchema, response: { 200: hostSchema } }
  }, async (request) => await host(request.params.id))

  fastify.post('/hosts/:id/drain', {
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
    schema: { tags, summary: 'Cordon the host: no new VMM is placed on it; what runs there stays', params: hostParamsSchema, response: { 200: hostSchema } }
  }, async (request) => {
    await drains.cordon(request.params.id)
    return await host(request.params.id)
  })

  fastify.post('/hosts/:id/uncordon', {
    schema: { tags, summary: 'End the cordon: the host takes new VMMs again, and a drain in progress stops', params: hostParamsSchema, response: { 200: hostSchema } }
  }, async (request) => {
    await drains.uncordon(request.params.id)
    return await host(request.params.id)
  })
}

export default routes
