/**
 * The API as a Fastify plugin (fastify/demo's layout): shared plugins first (problem details and
 * the route contract, then metrics, before any route they shape or instrument), then the public
 * routes, then everything under `/v1` behind the bearer token, the policy, the rate limit and the
 * audit trail. A project's routes are registered twice: under `/v1/projects/{project}`, and
 * unscoped under `/v1` for the `default` project, deprecated (docs/design.md §18).
 */
import websocket from '@fastify/websocket'
import type { FastifyInstance } from 'fastify'
import { validatorCompiler } from 'fastify-type-provider-zod'
import type { ApiConfig } from '../config/index.js'
import { jsonSerializerCompiler } from '../http/json-serializer.js'
import { routeContract } from '../http/route-contract.js'
import audit from './plugins/audit.js'
import { authorize } from './plugins/auth.js'
import database from './plugins/database.js'
import hostAgents from './plugins/host-agents.js'
import idempotency from './plugins/idempotency.js'
import metrics from './plugins/metrics.js'
import openapi from './plugins/openapi.js'
import operationFinishes from './plugins/operation-finishes.js'
import problemDetails from './plugins/problem-details.js'
import rateLimit from './plugins/rate-limit.js'
import { apiRouteContract } from './plugins/route-contract.js'
import temporal from './plugins/temporal.js'
import admin from './routes/admin.js'
import auditRoutes from './routes/audit.js'
import consoleRoutes from './routes/console.js'
import health from './routes/health.js'
import hosts from './routes/hosts.js'
import images from './routes/images.js'
import instances from './routes/instances.js'
import firewallRules from './routes/firewall-rules.js'
import networks from './routes/networks.js'
import operations from './routes/operations.js'
import projects from './routes/projects.js'
import tokens from './routes/tokens.js'
import type { RouteScope } from './schemas/projects.js'
import instanceRequests from './services/instance-requests.js'
import instancesRepository from './services/instances-repository.js'

export type AppOptions = Pick<ApiConfig, 'databaseUrl' | 'temporal' | 'tokens' | 'rateLimitPerMinute' | 'defaultStopGraceSeconds' | 'hostUnreachableAfterMs' | 'lease' | 'agentToken'>

export default async function app (fastify: FastifyInstance, opts: AppOptions): Promise<void> {
  fastify.setValidatorCompiler(validatorCompiler)
  fastify.setSerializerCompiler(jsonSerializerCompiler)
  // The API reads JSON only: a body of another type is a 415, even on a route that reads none,
  // rather than text Fastify would parse and the route ignore.
  fastify.removeContentTypeParser('text/plain')
  await fastify.register(problemDetails)
  await fastify.register(routeContract, apiRouteContract)
  await fastify.register(metrics)
  await fastify.register(database, { databaseUrl: opts.databaseUrl })
  await fastify.register(operationFinishes, { databaseUrl: opts.databaseUrl })
  await fastify.register(idempotency)
  await fastify.register(temporal, { temporal: opts.temporal })
  await fastify.register(instancesRepository, { hostUnreachableAfterMs: opts.hostUnreachableAfterMs, lease: opts.lease })
  await fastify.register(instanceRequests, { defaultStopGraceSeconds: opts.defaultStopGraceSeconds })
  await fastify.register(hostAgents, { agentToken: opts.agentToken })
  await fastify.register(websocket)
  await fastify.register(openapi)
  await fastify.register(health)
  await fastify.register(async (v1) => {
    await v1.register(authorize, { tokens: { ...opts.tokens, host: opts.agentToken } })
    await v1.register(rateLimit, { perMinute: opts.rateLimitPerMinute })
    await v1.register(audit)
    v1.addHook('preHandler', fastify.idempotent)
    await v1.register(async (scoped) => { await registerProjectRoutes(scoped, { scoped: true }) }, { prefix: '/projects/:project' })
    await v1.register(async (unscoped) => {
      unscoped.addHook('onRoute', (route) => { route.schema = { ...route.schema, deprecated: true } })
      await registerProjectRoutes(unscoped, { scoped: false })
    })
    await v1.register(projects)
    await v1.register(tokens)
    await v1.register(auditRoutes)
    await v1.register(hosts, { lease: opts.lease })
    await v1.register(images)
    await v1.register(admin)
  }, { prefix: '/v1' })
}

/** The routes of what a project owns: its instances (and their consoles), operations, networks and firewall rules. */
async function registerProjectRoutes (scope: FastifyInstance, options: RouteScope): Promise<void> {
  await scope.register(instances, options)
  await scope.register(consoleRoutes, options)
  await scope.register(operations, options)
  await scope.register(networks, options)
  await scope.register(firewallRules, options)
}
