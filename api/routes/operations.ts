/** `/v1/projects/{project}/operations/:id` (and the unscoped `/v1/operations/:id`): an accepted request and its outcome. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { projectOfInstance } from '../../db/instances.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { idParamsSchema } from '../schemas/common.js'
import { operationSchema } from '../schemas/operations.js'
import { paramsIn, type RouteScope } from '../schemas/projects.js'

const routes: FastifyPluginAsyncZod<RouteScope> = async (fastify, scope) => {
  fastify.get('/operations/:id', {
    config: { action: 'project.read' },
    schema: { tags: ['operations'], summary: "Get an operation on one of the project's instances", params: paramsIn(scope, idParamsSchema), response: { 200: operationSchema } }
  }, async (request) => {
    const operation = await fastify.instancesRepository.findOperation(request.params.id)
    // Another project's operation answers as one that does not exist.
    if (operation === null || await projectOfInstance(fastify.db, operation.instanceId) !== request.project!.id) {
      throw new ApiProblem(404, 'Not Found', `operation ${request.params.id} does not exist`)
    }
    return operation
  })
}

export default routes
