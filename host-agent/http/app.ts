/**
 * The agent's Fastify application: zod validation and serialisation, bearer authentication,
 * the `{error, message}` error bodies (the router's and Node's HTTP layer's included), the route
 * contract and the OpenAPI document that says all of it (`/openapi.json`), and the routes.
 */
import websocket from '@fastify/websocket'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { validatorCompiler } from 'fastify-type-provider-zod'
import type { Logger } from 'pino'
import { jsonSerializerCompiler } from '../../http/json-serializer.js'
import { openApiDocument } from '../../http/openapi.js'
import { routeContract } from '../../http/route-contract.js'
import { bearerAuth } from './auth.js'
import { clientErrorHandler, errorHandler, frameworkErrors, notFoundHandler } from './error-handler.js'
import { injectFaults } from './fault-injection.js'
import { agentRouteContract } from './route-contract.js'
import { consoleRoutes } from './console-routes.js'
import { deviceRoutes } from './device-routes.js'
import { leaseRoutes } from './lease-routes.js'
import { agentRoutes, type RouteOptions } from './routes.js'

/**
 * Requests are JSON documents of at most a few hundred KiB: an ensure with its spec at its limits
 * (user-data, SSH keys) is about 200 KiB, and the firewall policy it carries at its limits (the
 * rules of nine targets, domain/limits.ts) about 150 more. Anything larger is refused before it is
 * parsed.
 */
export const AGENT_BODY_LIMIT_BYTES = 512 * 1024

export interface AgentAppOptions {
  token: string
  /** Set only for tests: the state directory whose `fault` file says what to inject. */
  faultsFrom: string | null
}

export async function buildAgentApp (options: AgentAppOptions, log: Logger, routes: RouteOptions): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: log as FastifyBaseLogger, bodyLimit: AGENT_BODY_LIMIT_BYTES, frameworkErrors, clientErrorHandler })
  app.setValidatorCompiler(validatorCompiler)
  app.setSerializerCompiler(jsonSerializerCompiler)
  // The agent reads JSON only: a body of another type is a 415, even on a route that reads none.
  app.removeContentTypeParser('text/plain')
  app.setErrorHandler(errorHandler)
  app.setNotFoundHandler(notFoundHandler)
  // A body-less request (DELETE, a reboot, a press without deadline) may still say it sends
  // JSON; it has no body all the same, rather than an empty one that fails to parse.
  app.addHook('onRequest', async (request) => {
    const { headers } = request
    const bodyless = headers['transfer-encoding'] === undefined && (headers['content-length'] ?? '0') === '0'
    if (bodyless) delete headers['content-type']
  })
  app.addHook('onRequest', bearerAuth(options.token))
  if (options.faultsFrom !== null) app.addHook('onRequest', injectFaults(options.faultsFrom))
  await app.register(routeContract, agentRouteContract)
  await app.register(openApiDocument, {
    title: 'vmplane host agent',
    description: 'Manages the Cloud Hypervisor VMMs of one host for the vmplane control plane.'
  })
  await app.register(websocket)
  await app.register(agentRoutes, routes)
  await app.register(deviceRoutes, routes)
  await app.register(consoleRoutes, routes)
  await app.register(leaseRoutes, routes)
  return app
}
