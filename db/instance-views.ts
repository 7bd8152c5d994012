/**
 * The rows the API shows instances from: each instance with its active VMM, that VMM's host's
 * status, its operation in flight and its live migration, in one query, paged by keyset (its
 * insertion order, `seq`) so a page costs the same at any depth. Reads only; the API turns a row
 * into its view (api/services/instances-repository.ts).
 */
import type { InstanceState } from '../domain/instance.js'
import { INSTANCE_COLUMNS, MIGRATION_JOINS, MIGRATION_JSON, OPERATION_COLUMNS } from './rows.js'
import type { Queryable } from './pool.js'

const INSTANCE_VIEW_QUERY = `
  SELECT ${INSTANCE_COLUMNS}, i.seq,
         v.id AS vmm_id, v.host_id AS vmm_host_id, v.state AS vmm_state, v.reason AS vmm_reason, v.exit AS vmm_exit,
         v.unresponsive_since AS vmm_unresponsive_since, h.status AS host_status, h.status_since AS host_status_since,
         h.contact_failing_since AS host_contact_failing_since,
         to_jsonb(o) AS operation, mg.migration
    FROM instances i
    LEFT JOIN vmms v ON v.id = i.active_vmm_id
    LEFT JOIN hosts h ON h.id = v.host_id
    LEFT JOIN LATERAL (
      SELECT ${OPERATION_COLUMNS} FROM operations o
       WHERE o.instance_id = i.id AND o.finished_at IS NULL
       ORDER BY o.started_at DESC LIMIT 1
    ) o ON true
    LEFT JOIN LATERAL (
      SELECT ${MIGRATION_JSON} AS migration FROM migrations m ${MIGRATION_JOINS}
       WHERE m.instance_id = i.id AND m.finished_at IS NULL
    ) mg ON true`

export type InstanceViewRow = Record<string, any>

export async function findInstanceViewRow (db: Queryable, id: string): Promise<InstanceViewRow | null> {
  const { rows } = await db.query(`${INSTANCE_VIEW_QUERY} WHERE i.id = $1`, [id])
  return rows[0] ?? null
}

/**
 * A project's instances after position `afterSeq`, oldest first, `limit` at most: those in
 * `state`, or, without one, those not destroyed. Two statements, each with its own index
 * (`instances_project_state_seq`, `instances_project_live_seq`), so that no page steps over
 * destroyed rows, and so that the plan PostgreSQL keeps for the prepared statement (db/pool.ts)
 * need not serve both.
 */
export async function instanceViewRowsAfter (db: Queryable, page: { projectId: string, state: InstanceState | null, afterSeq: number, limit: number }): Promise<InstanceViewRow[]> {
  const { rows } = page.state === null
    ? await db.query(`${INSTANCE_VIEW_QUERY} WHERE i.project_id = $1 AND i.destroyed_at IS NULL AND i.seq > $2 ORDER BY i.seq LIMIT $3`, [page.projectId, page.afterSeq, page.limit])
    : await db.query(`${INSTANCE_VIEW_QUERY} WHERE i.project_id = $1 AND i.state = $2 AND i.seq > $3 ORDER BY i.seq LIMIT $4`, [page.projectId, page.state, page.afterSeq, page.limit])
  return rows
}
