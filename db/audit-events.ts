/**
 * The audit trail (docs/design.md §18): one row per mutating request a valid token made, with its
 * outcome; written by the API once the answer is sent (api/plugins/audit.ts), read by a project's
 * admins and by the fleet's tokens.
 */
import type { Queryable } from './pool.js'

export interface AuditEvent {
  id: number
  at: string
  tokenId: string
  tokenName: string
  projectId: string | null
  method: string
  route: string
  path: string
  status: number
  requestId: string
  remoteAddress: string
  idempotencyKey: string | null
}

export async function insertAuditEvent (db: Queryable, event: Omit<AuditEvent, 'id' | 'at'>): Promise<void> {
  await db.query(
    `INSERT INTO audit_events (token_id, token_name, project_id, method, route, path, status, request_id, remote_address, idempotency_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [event.tokenId, event.tokenName, event.projectId, event.method, event.route, event.path, event.status, event.requestId, event.remoteAddress, event.idempotencyKey]
  )
}

/** A page of events, newest first: one project's, or (with null) the whole fleet's; before the cursor's ID. */
export async function listAuditEvents (db: Queryable, options: { projectId: string | null, limit: number, before?: number }): Promise<AuditEvent[]> {
  const { rows } = await db.query(
    `SELECT * FROM audit_events
      WHERE ($1::uuid IS NULL OR project_id = $1::uuid) AND ($2::bigint IS NULL OR id < $2::bigint)
      ORDER BY id DESC LIMIT $3`,
    [options.projectId, options.before ?? null, options.limit]
  )
  return rows.map((row) => ({
    id: Number(row.id),
    at: row.at,
    tokenId: row.token_id,
    tokenName: row.token_name,
    projectId: row.project_id,
    method: row.method,
    route: row.route,
    path: row.path,
    status: row.status,
    requestId: row.request_id,
    remoteAddress: row.remote_address,
    idempotencyKey: row.idempotency_key
  }))
}
