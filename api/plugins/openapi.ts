/**
 * The API's OpenAPI document (`/openapi.json`, http/openapi.ts) and Swagger UI to try it (`/docs`).
 */
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'
import { openApiDocument } from '../../http/openapi.js'

export default fp(async (fastify) => {
  await fastify.register(openApiDocument, {
    title: 'vmplane',
    description: 'Virtual machines on Cloud Hypervisor hosts. Every request that changes an instance runs as a Temporal workflow under `instance-<id>`.'
  })
  await fastify.register(swaggerUi, { routePrefix: '/docs' })
}, { name: 'openapi' })
