/**
 * OpenAPI from the same zod schemas that validate requests (`/openapi.json`), and Swagger UI
 * to try them (`/docs`).
 */
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod'

export default fp(async (fastify) => {
  await fastify.register(swagger, {
    openapi: {
      info: {
        title: 'vmplane',
        description: 'Virtual machines on Cloud Hypervisor hosts. Every request that changes an instance runs as a Temporal workflow under `instance-<id>`.',
        version: '1'
      },
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } }
      },
      security: [{ bearer: [] }]
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject
  })
  await fastify.register(swaggerUi, { routePrefix: '/docs' })
  fastify.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
}, { name: 'openapi' })
