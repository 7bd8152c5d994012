/**
 * A server's OpenAPI document (`/openapi.json`, public), made from the same zod schemas that
 * validate its requests. OpenAPI 3.1, whose schemas are JSON Schema 2020-12 as zod writes them:
 * 3.0 cannot say "this object, or null" of a shared schema. What each route may answer beyond its
 * successes, and which routes need the token, comes from its route contract (route-contract.ts).
 */
import swagger from '@fastify/swagger'
import fp from 'fastify-plugin'
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod'

type Document = ReturnType<typeof jsonSchemaTransformObject>
interface Operation { requestBody?: { required?: boolean, content?: Record<string, { schema?: { anyOf?: Array<{ type?: string }> } }> } }

/**
 * @fastify/swagger marks every request body required; a body whose schema takes null (a stop's,
 * a press of the power button) may also be left out, and the document says so.
 */
function optionalBodies (document: Document): Document {
  const paths = ('paths' in document ? document.paths : undefined) ?? {}
  for (const operations of Object.values(paths) as Array<Record<string, Operation>>) {
    for (const operation of Object.values(operations)) {
      const schema = operation.requestBody?.content?.['application/json']?.schema
      if (operation.requestBody !== undefined && schema?.anyOf?.some((option) => option.type === 'null') === true) {
        operation.requestBody.required = false
      }
    }
  }
  return document
}

export const openApiDocument = fp<{ title: string, description: string }>(async (fastify, info) => {
  await fastify.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { ...info, version: '1' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } }
    },
    transform: jsonSchemaTransform,
    transformObject: (input) => optionalBodies(jsonSchemaTransformObject(input))
  })
  fastify.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
}, { name: 'openapi-document' })
