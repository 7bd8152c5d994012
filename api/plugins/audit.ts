/**
 * The audit trail's writer (docs/design.md §18): every request to change something (any method
 * but GET and HEAD) that a valid token made is recorded with its answer, before the answer is
 * sent, so a client that has its answer finds its record. Who (the token's ID and name, never its
 * secret), what (the method, the route's pattern and the path), the project, from where, the
 * status and the Idempotency-Key; a replayed answer is recorded again, as the request it was.
 *
 * Not recorded: hosts renewing their leases (`config: { audited: false }`), every 2 s per host,
 * which would bury what people did. A record PostgreSQL refuses is logged, and the answer sent.
 */
import fp from 'fastify-plugin'
import { insertAuditEvent } from '../../db/audit-events.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** False for a mutating route whose requests the audit trail leaves out. */
    audited?: boolean
  }
}

const READS = new Set(['GET', 'HEAD'])

export default fp(async (fastify) => {
  fastify.addHook('onSend', async (request, reply, payload) => {
    if (READS.has(request.method) || request.principal === null || request.routeOptions.config.audited === false) return payload
    const key = request.headers['idempotency-key']
    try {
      await insertAuditEvent(fastify.db, {
        tokenId: request.principal.tokenId,
        tokenName: request.principal.tokenName,
        projectId: request.project?.id ?? null,
        method: request.method,
        route: request.routeOptions.url ?? request.url,
        path: request.url.split('?')[0]!,
        status: reply.statusCode,
        requestId: String(request.id),
        remoteAddress: request.ip,
        idempotencyKey: typeof key === 'string' ? key.slice(0, 255) : null
      })
    } catch (err) {
      request.log.error({ err }, 'could not record the request in the audit trail')
    }
    return payload
  })
}, { name: 'audit', dependencies: ['database', 'authorize'] })
