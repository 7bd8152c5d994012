/**
 * The audit trail (docs/design.md §18): a project's at `/v1/projects/{project}/audit`, for its
 * admins and the fleet's tokens; the whole fleet's at `/v1/audit`. Newest first.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { listAuditEvents, type AuditEvent } from '../../db/audit-events.js'
import { auditListSchema, auditQuery, projectParamsSchema } from '../schemas/projects.js'
import { decodeCursor, encodeCursor } from '../services/cursors.js'

const tags = ['audit']

const routes: FastifyPluginAsyncZod = async (fastify) => {
  async function page (projectId: string | null, query: { limit: number, cursor?: string }) {
    const before = query.cursor === undefined ? undefined : decodeCursor(query.cursor)
    const rows = await listAuditEvents(fastify.db, { projectId, limit: query.limit + 1, before })
    const items = rows.slice(0, query.limit)
    return { items: items.map(view), nextCursor: rows.length > query.limit ? encodeCursor(items[items.length - 1]!.id) : null }
  }

  fastify.get('/projects/:project/audit', {
    config: { action: 'project.audit' },
    schema: { tags, summary: "The project's audit trail: every mutating request made in it, newest first", params: projectParamsSchema, querystring: auditQuery, response: { 200: auditListSchema } }
  }, async (request) => await page(request.project!.id, request.query))

  fastify.get('/audit', {
    config: { action: 'fleet.read' },
    schema: { tags, summary: 'The whole audit trail: every mutating request, newest first', querystring: auditQuery, response: { 200: auditListSchema } }
  }, async (request) => await page(null, request.query))
}

function view (event: AuditEvent) {
  const { projectId, ...rest } = event
  return { ...rest, project: projectId }
}

export default routes
