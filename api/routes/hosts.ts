/** `/v1/hosts`: the hypervisor hosts, their status and capacity. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { hostListSchema } from '../schemas/hosts.js'

const routes: FastifyPluginAsyncZod = async (fastify) => {
  fastify.get('/hosts', {
    schema: { tags: ['hosts'], summary: 'List hosts', response: { 200: hostListSchema } }
  }, async () => ({ items: await fastify.instancesRepository.listHosts() }))
}

export default routes
