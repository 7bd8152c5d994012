/**
 * The `drains` table: a host's drains and their progress, for `GET /v1/hosts` (docs/design.md §9,
 * §15). The API opens a drain's record (with the host's cordon, in one transaction) and closes
 * one whose workflow is gone (api/services/host-drains.ts); the drain's workflow records its
 * progress and its end (activities/drains.ts). A host has one open drain at most.
 */
import type { PoolClient, Queryable } from './pool.js'

/** Opens a drain of the host unless one is open; whether this one was. */
export async function openDrain (tx: PoolClient, drainId: string, hostId: string): Promise<boolean> {
  const inserted = await tx.query(
    `INSERT INTO drains (id, host_id, status) SELECT $1, $2, 'draining'
      WHERE NOT EXISTS (SELECT 1 FROM drains WHERE host_id = $2 AND finished_at IS NULL)
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    [drainId, hostId]
  )
  return inserted.rowCount !== 0
}

/** The ID of the host's open drain, whoever opened it; null without one. */
export async function openDrainOf (db: Queryable, hostId: string): Promise<string | null> {
  const live = await db.query('SELECT id FROM drains WHERE host_id = $1 AND finished_at IS NULL', [hostId])
  return live.rows[0]?.id ?? null
}

/** Closes the host's open drain as stopped (its workflow is gone). */
export async function closeOpenDrain (db: Queryable, hostId: string): Promise<void> {
  await db.query("UPDATE drains SET status = 'stopped', finished_at = now() WHERE host_id = $1 AND finished_at IS NULL", [hostId])
}

/** Records a drain's progress, and its end once its status is not `draining`; never after its end. */
export async function upsertDrainProgress (
  db: Queryable,
  hostId: string,
  progress: { drainId: string, status: string, total: number, migrated: number, failed: number, lastError: string | null }
): Promise<void> {
  await db.query(
    `INSERT INTO drains (id, host_id, status, total, migrated, failed, last_error, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $3 <> 'draining' THEN now() END)
     ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, total = EXCLUDED.total, migrated = EXCLUDED.migrated,
       failed = EXCLUDED.failed, last_error = EXCLUDED.last_error, finished_at = EXCLUDED.finished_at
     WHERE drains.finished_at IS NULL`,
    [progress.drainId, hostId, progress.status, progress.total, progress.migrated, progress.failed, progress.lastError]
  )
}
