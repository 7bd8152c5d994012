/**
 * Projects' quotas and what they use (docs/design.md §18, "Quotas").
 *
 * Theory of operation. An instance is charged once, for everything it reserves (its vCPUs and
 * memory, its disks' size, itself, its addresses), when its rows are inserted (db/instances.ts),
 * in the same transaction; it is given back once, when it is destroyed, which is recorded only
 * after its VMMs are confirmed gone and its disks removed, with its disks' and addresses' rows
 * (db/instances.ts `releaseDevicesOf`; the reconciler gives back any a crash left held).
 *
 * - The charge is one statement: it inserts the instance's charge row, keyed by the instance, and
 *   adds it to the project's use only where every limit still holds. The quotas row's lock orders
 *   the charges of one project: each one sees the use the one before it committed. A second
 *   charge of the same instance (the create workflow ensuring the rows the API inserted) finds the
 *   charge row and adds nothing; so does a replayed activity.
 * - A charge that would pass a limit inserts its row and changes no use; the caller's transaction
 *   is then rolled back with the refusal, which names the limits passed.
 * - The release deletes the charge row and takes it off the use, in one statement: a second
 *   release finds no row.
 * - A project being deleted has its quotas row deleted under the same lock: a charge waiting on
 *   it finds none, and the create is refused as of a project that does not exist.
 */
import { QUOTA_RESOURCES, exceededBy, type QuotaLimits, type QuotaResource, type QuotaUse } from '../domain/projects.js'
import type { Queryable } from './pool.js'

export interface ProjectQuotas {
  limits: QuotaLimits
  use: QuotaUse
}

export type ChargeOutcome =
  | { charged: true }
  | { charged: false, reason: 'project-gone' }
  | { charged: false, reason: 'over-quota', exceeded: QuotaResource[], quotas: ProjectQuotas }

/** Each quota resource's column: its limit, and what is used. */
const COLUMN: Record<QuotaResource, string> = {
  vcpus: 'vcpus',
  memoryMiB: 'memory_mib',
  diskGiB: 'disk_gib',
  instances: 'instances',
  addresses: 'addresses'
}

function toQuotas (row: Record<string, any>): ProjectQuotas {
  const limits = {} as QuotaLimits
  const use = {} as QuotaUse
  for (const resource of QUOTA_RESOURCES) {
    limits[resource] = row[COLUMN[resource]] ?? null
    use[resource] = Number(row[`used_${COLUMN[resource]}`])
  }
  return { limits, use }
}

/** A new project's quotas row: no limits, nothing used. */
export async function insertQuotasRow (db: Queryable, projectId: string): Promise<void> {
  await db.query('INSERT INTO project_quotas (project_id) VALUES ($1)', [projectId])
}

/** Locks the project's quotas row, as a charge does; whether the project is live (has one). */
export async function lockQuotasRow (db: Queryable, projectId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM project_quotas WHERE project_id = $1 FOR UPDATE', [projectId])
  return rowCount !== 0
}

/** Deletes the quotas row of a project being deleted: a charge waiting on its lock then finds none. */
export async function deleteQuotasRow (db: Queryable, projectId: string): Promise<void> {
  await db.query('DELETE FROM project_quotas WHERE project_id = $1', [projectId])
}

export async function readQuotas (db: Queryable, projectId: string): Promise<ProjectQuotas | null> {
  const { rows } = await db.query('SELECT * FROM project_quotas WHERE project_id = $1', [projectId])
  return rows.length === 0 ? null : toQuotas(rows[0])
}

/** Sets the limits given (null: no limit); those left out stay. Null when the project is gone. */
export async function setQuotas (db: Queryable, projectId: string, limits: Partial<QuotaLimits>): Promise<ProjectQuotas | null> {
  const { rows } = await db.query(
    `UPDATE project_quotas SET
        vcpus = CASE WHEN $2 THEN $3::integer ELSE vcpus END,
        memory_mib = CASE WHEN $4 THEN $5::bigint ELSE memory_mib END,
        disk_gib = CASE WHEN $6 THEN $7::integer ELSE disk_gib END,
        instances = CASE WHEN $8 THEN $9::integer ELSE instances END,
        addresses = CASE WHEN $10 THEN $11::integer ELSE addresses END
      WHERE project_id = $1 RETURNING *`,
    [projectId, ...QUOTA_RESOURCES.flatMap((resource) => [limits[resource] !== undefined, limits[resource] ?? null])]
  )
  return rows.length === 0 ? null : toQuotas(rows[0])
}

/** Charges the instance to its project, once (module comment). */
export async function chargeInstance (tx: Queryable, instanceId: string, projectId: string, charge: QuotaUse): Promise<ChargeOutcome> {
  const { rows } = await tx.query(
    `WITH charge AS (
       INSERT INTO quota_charges (instance_id, project_id, vcpus, memory_mib, disk_gib, addresses)
       VALUES ($1, $2, $3, $4, $5, $7)
       ON CONFLICT (instance_id) DO NOTHING
       RETURNING *
     ), used AS (
       UPDATE project_quotas q SET
           used_vcpus = q.used_vcpus + c.vcpus,
           used_memory_mib = q.used_memory_mib + c.memory_mib,
           used_disk_gib = q.used_disk_gib + c.disk_gib,
           used_instances = q.used_instances + $6,
           used_addresses = q.used_addresses + c.addresses
         FROM charge c
        WHERE q.project_id = c.project_id
          AND (q.vcpus IS NULL OR q.used_vcpus + c.vcpus <= q.vcpus)
          AND (q.memory_mib IS NULL OR q.used_memory_mib + c.memory_mib <= q.memory_mib)
          AND (q.disk_gib IS NULL OR q.used_disk_gib + c.disk_gib <= q.disk_gib)
          AND (q.instances IS NULL OR q.used_instances + $6 <= q.instances)
          AND (q.addresses IS NULL OR q.used_addresses + c.addresses <= q.addresses)
       RETURNING q.project_id
     )
     SELECT (SELECT count(*) FROM charge)::int AS new_charges, (SELECT count(*) FROM used)::int AS charged`,
    [instanceId, projectId, charge.vcpus, charge.memoryMiB, charge.diskGiB, charge.instances, charge.addresses]
  )
  if (rows[0].new_charges === 0 || rows[0].charged === 1) return { charged: true }
  // Refused: the quotas as the refusal saw them, for the answer (the statement's own snapshot may
  // predate the charges it waited for).
  const refusal = await tx.query('SELECT * FROM project_quotas WHERE project_id = $1 FOR SHARE', [projectId])
  if (refusal.rows.length === 0) return { charged: false, reason: 'project-gone' }
  const quotas = toQuotas(refusal.rows[0])
  return { charged: false, reason: 'over-quota', exceeded: exceededBy(charge, quotas.limits, quotas.use), quotas }
}

/**
 * Gives the charges of destroyed instances back to their projects, once: the instance's (in the
 * transaction that records it destroyed), or with null, every one still held (the reconciler's).
 * How many were given back.
 */
export async function releaseChargesOfDestroyed (db: Queryable, instanceId: string | null): Promise<number> {
  const { rows } = await db.query(
    `WITH released AS (
       DELETE FROM quota_charges c USING instances i
        WHERE c.instance_id = i.id AND i.destroyed_at IS NOT NULL AND ($1::uuid IS NULL OR i.id = $1::uuid)
       RETURNING c.*
     ), per_project AS (
       SELECT project_id, sum(vcpus) AS vcpus, sum(memory_mib) AS memory_mib, sum(disk_gib) AS disk_gib,
              count(*) AS instances, sum(addresses) AS addresses
         FROM released GROUP BY project_id
     ), given_back AS (
       UPDATE project_quotas q SET
           used_vcpus = q.used_vcpus - r.vcpus,
           used_memory_mib = q.used_memory_mib - r.memory_mib,
           used_disk_gib = q.used_disk_gib - r.disk_gib,
           used_instances = q.used_instances - r.instances,
           used_addresses = q.used_addresses - r.addresses
         FROM per_project r
        WHERE q.project_id = r.project_id
     )
     SELECT count(*)::int AS released FROM released`,
    [instanceId]
  )
  return rows[0].released
}
