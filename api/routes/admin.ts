/**
 * `/v1/admin/reconcile`: run a reconciler pass now (it is a Temporal Schedule; this triggers
 * it, as `temporal schedule trigger --schedule-id vmplane-reconciler` does), and what the last
 * passes found and did.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { RECONCILE_SCHEDULE_ID } from '../../contract/workflows.js'
import { lastReconcilePasses } from '../../db/reconcile-passes.js'
import { urlInteger } from '../../domain/url-integer.js'

const passSchema = z.object({
  id: z.uuid(),
  startedAt: z.string(),
  finishedAt: z.string(),
  counts: z.record(z.string(), z.number()).describe('what the pass found and did, by kind: orphansReaped, vmmsGone, instancesRedriven, …'),
  actions: z.array(z.string())
}).meta({ id: 'ReconcilePass' })

const routes: FastifyPluginAsyncZod = async (fastify) => {
  fastify.post('/admin/reconcile', {
    config: { action: 'fleet.write' },
    schema: {
      tags: ['admin'],
      summary: 'Run a reconciler pass now',
      response: { 202: z.object({ scheduleId: z.string(), triggered: z.literal(true) }) }
    }
  }, async (_request, reply) => {
    await fastify.temporal.schedule.getHandle(RECONCILE_SCHEDULE_ID).trigger()
    return await reply.code(202).send({ scheduleId: RECONCILE_SCHEDULE_ID, triggered: true as const })
  })

  fastify.get('/admin/reconcile', {
    config: { action: 'fleet.read' },
    schema: {
      tags: ['admin'],
      summary: "The reconciler's last passes, newest first",
      querystring: z.strictObject({ limit: urlInteger(1, 100).default(10) }),
      response: { 200: z.object({ items: z.array(passSchema) }) }
    }
  }, async (request) => {
    return { items: await lastReconcilePasses(fastify.db, request.query.limit) }
  })
}

export default routes
