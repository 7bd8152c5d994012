/**
 * The agent's HTTP API, exactly as `domain/host-agent-api.ts` documents it. Every parameter and
 * body is validated with its zod schema before a handler runs, so a malformed or hostile
 * request is refused before it can reach a VMM. A POST may come without a body (Fastify then
 * hands over `null`): a press without deadline, a reboot. A press's `killAfterMs` becomes a
 * deadline on this host's clock as the request arrives: the control plane's clock is not ours.
 */
import { z } from 'zod'
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import type { Registry } from 'prom-client'
import {
  agentHealthSchema,
  migrationOfCallSchema,
  ensureVmmRequestSchema,
  policyGenerationSchema,
  powerButtonRequestSchema,
  sendMigrationRequestSchema,
  strayListSchema,
  strayParamsSchema,
  strayQuerySchema,
  vmmIdParamsSchema,
  vmmListSchema,
  vmmPolicySchema,
  vmmViewSchema
} from '../../domain/host-agent-api.js'
import { notFound } from '../errors.js'
import type { Supervisor } from '../supervisor/supervisor.js'
import type { LeaseRouteOptions } from './lease-routes.js'

export interface RouteOptions extends LeaseRouteOptions {
  supervisor: Supervisor
  /** The agent's Prometheus registry (host-agent/metrics.ts). */
  metrics: Registry
  health: z.infer<typeof agentHealthSchema>
}

export const agentRoutes: FastifyPluginAsyncZod<RouteOptions> = async (app, { supervisor, metrics, health }) => {
  const params = vmmIdParamsSchema
  const view = { 200: vmmViewSchema }

  app.get('/healthz', { schema: { response: { 200: agentHealthSchema } } }, async () => health)

  // Prometheus's, not part of the agent's API document.
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => await reply.type(metrics.contentType).send(await metrics.metrics()))

  app.get('/v1/vmms', { schema: { response: { 200: vmmListSchema } } }, async () => ({ items: supervisor.list() }))

  app.get('/v1/vmms/:id', { schema: { params, response: view } }, async (request) => {
    return (await supervisor.get(request.params.id)).view()
  })

  app.put('/v1/vmms/:id', {
    schema: { params, body: ensureVmmRequestSchema, response: { ...view, 201: vmmViewSchema } }
  }, async (request, reply) => {
    const { view, created } = await supervisor.ensure(request.params.id, request.body)
    return await reply.code(created ? 201 : 200).send(view)
  })

  app.put('/v1/vmms/:id/policy', {
    schema: { params, body: vmmPolicySchema, response: { 200: policyGenerationSchema } }
  }, async (request) => await supervisor.setPolicy(request.params.id, request.body))

  app.post('/v1/vmms/:id/power-button', {
    schema: { params, body: powerButtonRequestSchema.nullish(), response: view }
  }, async (request) => {
    const killAfterMs = request.body?.killAfterMs
    return await supervisor.pressPowerButton(request.params.id, killAfterMs === undefined ? null : new Date(Date.now() + killAfterMs))
  })

  app.post('/v1/vmms/:id/reboot', {
    schema: { params, body: z.strictObject({}).nullish(), response: view }
  }, async (request) => await supervisor.reboot(request.params.id))

  app.post('/v1/vmms/:id/migration/send', {
    schema: { params, body: sendMigrationRequestSchema, response: view }
  }, async (request) => await supervisor.sendMigration(request.params.id, request.body))

  app.post('/v1/vmms/:id/migration/cancel', {
    schema: { params, body: migrationOfCallSchema, response: view }
  }, async (request) => await supervisor.cancelMigration(request.params.id, request.body))

  app.post('/v1/vmms/:id/migration/resume', {
    schema: { params, body: migrationOfCallSchema, response: view }
  }, async (request) => await supervisor.resumeHeldSource(request.params.id, request.body))

  app.delete('/v1/vmms/:id', { schema: { params, response: view } }, async (request) => {
    return await supervisor.destroy(request.params.id)
  })

  app.get('/v1/strays', { schema: { response: { 200: strayListSchema } } }, async () => ({ items: await supervisor.strays() }))

  app.delete('/v1/strays/:pid', {
    schema: { params: strayParamsSchema, querystring: strayQuerySchema, response: { 200: z.object({ reaped: z.literal(true) }) } }
  }, async (request) => {
    if (!await supervisor.reapStray(request.params.pid, request.query.startTime)) {
      throw notFound('stray', `no stray VMM process ${request.params.pid} started at ${request.query.startTime}`)
    }
    supervisor.log.warn({ pid: request.params.pid }, 'reaped a stray VMM process on request')
    return { reaped: true as const }
  })
}
