/**
 * `/healthz`: the API process answers. `/readyz`: it can do its job, meaning PostgreSQL and
 * Temporal answer and a worker is polling the task queue (otherwise accepted operations would
 * sit unprocessed). Hosts are not a condition of readiness: a start made before any host has
 * room waits for one (`NoCapacity`); `activeHosts` says how many hosts can take work now.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { countActiveHosts } from '../../db/hosts.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { problemContent } from '../plugins/route-contract.js'

/** A worker long-polls continuously; one not seen for this long is gone. */
const WORKER_SEEN_WITHIN_MS = 90_000

const routes: FastifyPluginAsyncZod = async (fastify) => {
  // Probed every few seconds by supervisors: their requests are not worth a log line each.
  fastify.get('/healthz', {
    logLevel: 'warn',
    schema: { tags: ['health'], response: { 200: z.object({ status: z.literal('ok') }) } }
  }, async () => ({ status: 'ok' as const }))

  fastify.get('/readyz', {
    logLevel: 'warn',
    schema: {
      tags: ['health'],
      response: {
        200: z.object({
          status: z.literal('ready'),
          activeHosts: z.number().int().describe('hosts that can take work now; a start made while there is none waits for one (NoCapacity)')
        }),
        503: problemContent
      }
    }
  }, async () => {
    const problems: string[] = []
    const activeHosts = await countActiveHosts(fastify.db)
      .catch((err: Error) => { problems.push(`PostgreSQL: ${err.message}`) })
    const { namespace, taskQueue } = fastify.temporalConfig
    const queue = await fastify.temporal.workflowService.describeTaskQueue({
      namespace,
      taskQueue: { name: taskQueue },
      taskQueueType: 1 // TASK_QUEUE_TYPE_WORKFLOW
    }).catch((err: Error) => { problems.push(`Temporal: ${err.message}`) })
    if (queue !== undefined) {
      const seen = (queue.pollers ?? []).some((p) => Date.now() - Number(p.lastAccessTime?.seconds ?? 0) * 1000 < WORKER_SEEN_WITHIN_MS)
      if (!seen) problems.push(`no worker is polling task queue ${taskQueue}`)
    }
    if (problems.length > 0) throw new ApiProblem(503, 'Service Unavailable', `not ready: ${problems.join('; ')}`)
    return { status: 'ready' as const, activeHosts: activeHosts ?? 0 }
  })
}

export default routes
