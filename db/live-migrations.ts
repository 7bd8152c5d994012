/**
 * The `migrations` table: live migrations of instances between hosts (docs/design.md §9, §15;
 * not the schema's migrations, which db/migrate.ts runs from db/migrations/).
 *
 * A migration's row is written by its migrate execution only, through the worker's activities:
 * inserted at its first step (`reserving`, naming the source), its target named by its placement
 * (activities/vmm-records.ts), then moved forward only, and never once it is over, so a late or
 * repeated step cannot undo a later one. The API reads it with its two VMMs, as one JSON value.
 */
import type { Migration, MigrationRecordPhase } from '../domain/migration.js'
import type { MigrateRequest } from '../domain/requests.js'
import { MIGRATION_JOINS, MIGRATION_JSON, toMigration } from './rows.js'
import type { PoolClient, Queryable } from './pool.js'

/** Inserts the migration at its first step, `reserving`; a second insert finds the first's row. */
export async function insertMigration (
  tx: PoolClient,
  migration: { id: string, instanceId: string, source: { vmmId: string, hostId: string, requestedHostId: string | null } }
): Promise<void> {
  const { id, instanceId, source } = migration
  await tx.query(
    `INSERT INTO migrations (id, instance_id, source_vmm_id, source_host_id, requested_host_id, phase)
     VALUES ($1, $2, $3, $4, $5, 'reserving') ON CONFLICT (id) DO NOTHING`,
    [id, instanceId, source.vmmId, source.hostId, source.requestedHostId]
  )
}

/** The phases in the order a migration goes through them; the four last are its ends. */
const MIGRATION_ORDER = "ARRAY['reserving', 'preparing', 'sending', 'committed', 'succeeded', 'failed', 'cancelled', 'aborted']"

/** Moves the migration to `phase`, unless that is behind it or it is over. */
export async function advanceMigration (
  tx: PoolClient,
  step: { id: string, phase: MigrationRecordPhase, reason?: string | null, cancelRequested?: boolean }
): Promise<void> {
  const over = ['succeeded', 'failed', 'cancelled', 'aborted'].includes(step.phase)
  await tx.query(
    `UPDATE migrations SET
       phase = $2,
       reason = COALESCE($3, reason),
       cancel_requested_at = CASE WHEN $4 THEN COALESCE(cancel_requested_at, now()) ELSE cancel_requested_at END,
       committed_at = CASE WHEN $2 = 'committed' THEN COALESCE(committed_at, now()) ELSE committed_at END,
       finished_at = CASE WHEN $5 THEN now() END,
       updated_at = now()
     WHERE id = $1 AND finished_at IS NULL
       AND array_position(${MIGRATION_ORDER}, $2::text) >= array_position(${MIGRATION_ORDER}, phase)`,
    [step.id, step.phase, step.reason ?? null, step.cancelRequested === true, over]
  )
}

/** Names the migration's target, as its placement chose it. */
export async function setMigrationTarget (tx: PoolClient, migrationId: string, vmmId: string, hostId: string): Promise<void> {
  await tx.query('UPDATE migrations SET target_vmm_id = $2, target_host_id = $3, updated_at = now() WHERE id = $1', [migrationId, vmmId, hostId])
}

export interface MigrationRow {
  phase: MigrationRecordPhase
  reason: string | null
  cancelRequested: boolean
  sourceVmmId: string
  targetVmmId: string | null
}

export async function readMigrationRow (db: Queryable, migrationId: string): Promise<MigrationRow | null> {
  const { rows } = await db.query('SELECT phase, reason, cancel_requested_at, source_vmm_id, target_vmm_id FROM migrations WHERE id = $1', [migrationId])
  if (rows.length === 0) return null
  const [row] = rows
  return { phase: row.phase, reason: row.reason, cancelRequested: row.cancel_requested_at !== null, sourceVmmId: row.source_vmm_id, targetVmmId: row.target_vmm_id }
}

/** The request of the instance's migration that has not ended, to carry it on; null without one. */
export async function liveMigrationOf (db: Queryable, instanceId: string): Promise<MigrateRequest | null> {
  const { rows } = await db.query('SELECT id, requested_host_id, started_at FROM migrations WHERE instance_id = $1 AND finished_at IS NULL', [instanceId])
  if (rows.length === 0) return null
  const [row] = rows
  return {
    kind: 'migrate',
    operationId: row.id,
    instanceId,
    requestedAt: new Date(row.started_at).toISOString(),
    ...(row.requested_host_id === null ? {} : { targetHostId: row.requested_host_id })
  }
}

/** The instance's migrations, newest first, 100 at most. */
export async function migrationsOf (db: Queryable, instanceId: string): Promise<Migration[]> {
  const { rows } = await db.query(`SELECT ${MIGRATION_JSON} AS migration FROM migrations m ${MIGRATION_JOINS} WHERE m.instance_id = $1 ORDER BY m.started_at DESC LIMIT 100`, [instanceId])
  return rows.map((row) => toMigration(row.migration))
}

export async function migrationOf (db: Queryable, instanceId: string, migrationId: string): Promise<Migration | null> {
  const { rows } = await db.query(`SELECT ${MIGRATION_JSON} AS migration FROM migrations m ${MIGRATION_JOINS} WHERE m.id = $1 AND m.instance_id = $2`, [migrationId, instanceId])
  return rows.length === 0 ? null : toMigration(rows[0].migration)
}
