/** `/v1/operations/:id`: an accepted request and its outcome. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { ApiProblem } from '../plugins/problem-details.js'
import { idParamsSchema } from '../schemas/common.js'
import { operationSchema } from '../schemas/operations.js'

const routes: FastifyPluginAsyncZod = async (fastify) => {
  fastify.get('/operations/:id', {
    schema: { tags: ['operations'], summary: 'Get an operation', params: idParamsSchema, response: { 200: operationSchema } }
  }, async (request) => {
    const operation = await fastify.instancesRepository.findOperation(request.params.id)
    if (operation === null) throw new ApiProblem(404, 'Not Found', `operation ${request.params.id} does not exist`)
    return operation
  })
}

export default routes
