/**
 * Theory of operation: the write path, PostgreSQL's side (docs/design.md §8).
 *
 * An instance's execution is the only writer of its record (I4), and it writes only through
 * these activities, which it schedules as regular activities: a write happens only once the
 * workflow task that decided it has completed, so the decision is in the history before its
 * effect, and a workflow task that is retried (a worker killed or frozen, a task timeout) has
 * made no write that its retry could contradict.
 *
 * Every change is keyed by its decision (domain/decisions.ts): the key, hashed, is the ID of
 * the event the change appends. A change whose event exists was made before (an activity retried
 * after a crash, an execution replayed or reset) and is not made again; the activity answers
 * with the record as it is, and the execution takes that as the truth. A change never fails
 * because the record moved on since the execution last read it (only a reset's earlier run can
 * do that): it is applied to the record as it is, and the execution learns what that is from the
 * answer. A destroyed instance stays destroyed: a change records its event and operation, and
 * touches none of the instance's fields.
 *
 * A change also carries the VMM reports the execution received since its last write, applied
 * first in the same transaction, so an instance never shows a state its VMM's record does not
 * back.
 */
import { ApplicationFailure } from '@temporalio/activity'
import type { ChangeResult, InstanceChange, InstanceSnapshot, MigrationUpdate, OperationUpdate, RecordedMigration } from '../contract/records.js'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { INSTANCE_COLUMNS, VMM_COLUMNS, toInstance, toVmm } from '../db/rows.js'
import { insertInstance } from '../db/instances.js'
import { crashPoint } from '../faults/crash-points.js'
import type { NewInstance } from '../domain/requests.js'
import type { VmmRecord } from '../domain/vmm.js'
import { appendEvent, eventIdOf } from './instance-events.js'
import { applyObservations } from './vmm-observations.js'

export async function readSnapshot (db: Pool | PoolClient, instanceId: string): Promise<InstanceSnapshot | null> {
  const { rows } = await db.query(`SELECT ${INSTANCE_COLUMNS} FROM instances i WHERE i.id = $1`, [instanceId])
  if (rows.length === 0) return null
  const instance = toInstance(rows[0])
  const vmms = await db.query(
    `SELECT ${VMM_COLUMNS} FROM vmms v
      WHERE v.instance_id = $1 AND (v.state NOT IN ('destroyed', 'failed', 'lost') OR v.id = $2)
      ORDER BY v.created_at`,
    [instanceId, instance.activeVmmId]
  )
  const all = vmms.rows.map(toVmm)
  return {
    instance,
    liveVmms: all.filter((v) => v.state !== 'destroyed' && v.state !== 'failed' && v.state !== 'lost'),
    activeVmm: all.find((v) => v.id === instance.activeVmmId) ?? null
  }
}

/**
 * The instance as an execution begins with it. A create's execution first inserts the rows if
 * the API did not (it died before its transaction committed); `null` if the instance does not
 * exist (or, for a create, its rows cannot be made now: its name or an address it asked for was
 * taken meanwhile, its network deleted, the storage filled. Nothing is made then, and nobody was
 * told the create was accepted).
 */
export async function openInstance (pool: Pool, instanceId: string, create?: NewInstance): Promise<InstanceSnapshot | null> {
  if (create !== undefined) {
    const outcome = await inTransaction(pool, async (tx) => {
      const inserted = await insertInstance(tx, instanceId, create)
      // Nothing of a create that cannot be made stays: the transaction is rolled back.
      if (!inserted.inserted) throw new InsertRefused()
      return inserted
    }).catch((err: unknown) => { if (err instanceof InsertRefused) return null; throw err })
    if (outcome === null) return null
  }
  return await readSnapshot(pool, instanceId)
}

class InsertRefused extends Error {}

/** Records one change; see the module comment for why it is safe to retry. */
export async function recordInstanceChange (pool: Pool, change: InstanceChange): Promise<ChangeResult> {
  const result = await inTransaction(pool, async (tx) => await applyInstanceChange(tx, change))
  crashPoint('change.after-commit', change.kind)
  if (change.migration?.phase === 'committed') crashPoint('migrate.after-commit')
  return result
}

/** Applies a change inside a transaction of the caller's (placement makes one with the VMM's row). */
export async function applyInstanceChange (tx: PoolClient, change: InstanceChange): Promise<ChangeResult> {
  const vmms = await applyObservations(tx, change.instanceId, change.observations ?? [])
  const locked = await tx.query('SELECT destroyed_at FROM instances WHERE id = $1 FOR UPDATE', [change.instanceId])
  if (locked.rowCount === 0) throw ApplicationFailure.nonRetryable(`instance ${change.instanceId} does not exist`, 'InstanceNotFound')
  const eventId = eventIdOf(change.decision)
  const made = await tx.query('SELECT 1 FROM instance_events WHERE id = $1', [eventId])
  const madeBefore = made.rowCount !== 0
  if (!madeBefore) {
    if (locked.rows[0].destroyed_at === null) await updateInstance(tx, change)
    if (change.operation !== undefined) await upsertOperation(tx, change.instanceId, change.operation)
    if (change.migration !== undefined) await upsertMigration(tx, change.instanceId, change.migration)
    await appendEvent(tx, { ...change, eventId, operationId: change.operation?.id ?? null })
  }
  const snapshot = await readSnapshot(tx, change.instanceId)
  if (snapshot === null) throw new Error(`instance ${change.instanceId} vanished inside a transaction`)
  return { snapshot, vmms, madeBefore }
}

async function updateInstance (tx: PoolClient, change: InstanceChange): Promise<void> {
  const set = change.set ?? {}
  await tx.query(
    `UPDATE instances SET
        state = COALESCE($2, state),
        intended_state = COALESCE($3, intended_state),
        active_vmm_id = CASE WHEN $4 THEN $5::uuid ELSE active_vmm_id END,
        last_error = CASE WHEN $6 THEN $7::jsonb ELSE last_error END,
        destroyed_at = CASE WHEN $8 THEN now() ELSE destroyed_at END,
        restart_attempts = COALESCE($9, restart_attempts),
        restart_at = CASE WHEN $10 THEN $11::timestamptz ELSE restart_at END,
        generation = generation + 1,
        updated_at = now()
      WHERE id = $1`,
    [
      change.instanceId,
      set.state ?? null,
      set.intendedState ?? null,
      set.activeVmmId !== undefined,
      set.activeVmmId ?? null,
      set.lastError !== undefined,
      set.lastError === undefined || set.lastError === null ? null : JSON.stringify(set.lastError),
      set.destroyed === true,
      set.restartAttempts ?? null,
      set.restartAt !== undefined,
      set.restartAt ?? null
    ]
  )
  if (set.destroyed === true) {
    // The instance's VMMs are confirmed gone (the halt saw to it): what they held is free again,
    // its disks' space and its interfaces' addresses and MACs too.
    await tx.query('DELETE FROM reservations r USING vmms v WHERE r.vmm_id = v.id AND v.instance_id = $1', [change.instanceId])
    await tx.query('UPDATE disks SET destroyed_at = now() WHERE instance_id = $1 AND destroyed_at IS NULL', [change.instanceId])
    await tx.query('UPDATE interfaces SET released_at = now() WHERE instance_id = $1 AND released_at IS NULL', [change.instanceId])
  }
}

/**
 * The API inserts an operation's row when it accepts the request; the workflow upserts it, so
 * the row exists even if the API died between starting the workflow and writing it. An outcome
 * once recorded is final: a later change cannot turn a finished operation back to running, nor
 * give it another outcome.
 */
async function upsertOperation (tx: PoolClient, instanceId: string, op: OperationUpdate): Promise<void> {
  const finished = op.status !== 'running'
  await tx.query(
    `INSERT INTO operations (id, instance_id, kind, status, error, workflow_id, run_id, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $8 THEN now() END)
     ON CONFLICT (id) DO UPDATE SET
       status = EXCLUDED.status,
       error = EXCLUDED.error,
       run_id = EXCLUDED.run_id,
       finished_at = EXCLUDED.finished_at
     WHERE operations.finished_at IS NULL`,
    [op.id, instanceId, op.kind, op.status, op.error == null ? null : JSON.stringify(op.error), op.workflowId, op.runId, finished]
  )
}

export async function readMigration (db: Pool, migrationId: string): Promise<RecordedMigration | null> {
  const { rows } = await db.query('SELECT phase, reason, cancel_requested_at, source_vmm_id, target_vmm_id FROM migrations WHERE id = $1', [migrationId])
  if (rows.length === 0) return null
  const [row] = rows
  const vmms = await db.query(`SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.id = ANY($1::uuid[])`, [[row.source_vmm_id, row.target_vmm_id].filter((id) => id !== null)])
  const vmm = (id: string | null): VmmRecord | null => {
    const found = vmms.rows.find((r) => r.id === id)
    return found === undefined ? null : toVmm(found)
  }
  return { id: migrationId, phase: row.phase, reason: row.reason, cancelRequested: row.cancel_requested_at !== null, source: vmm(row.source_vmm_id)!, target: vmm(row.target_vmm_id) }
}

/** The phases in the order a migration goes through them; the four last are its ends. */
const MIGRATION_ORDER = "ARRAY['reserving', 'preparing', 'sending', 'committed', 'succeeded', 'failed', 'cancelled', 'aborted']"

/**
 * Records a migration's step: inserted at its first (`reserving`, naming the source), then moved
 * forward only, and never once it is over, so a late or repeated step cannot undo a later one.
 */
async function upsertMigration (tx: PoolClient, instanceId: string, update: MigrationUpdate): Promise<void> {
  const over = ['succeeded', 'failed', 'cancelled', 'aborted'].includes(update.phase)
  const values = [update.id, update.phase, update.reason ?? null, update.cancelRequested === true, over]
  if (update.source !== undefined) {
    await tx.query(
      `INSERT INTO migrations (id, instance_id, source_vmm_id, source_host_id, requested_host_id, phase)
       VALUES ($1, $2, $3, $4, $5, 'reserving') ON CONFLICT (id) DO NOTHING`,
      [update.id, instanceId, update.source.vmmId, update.source.hostId, update.source.requestedHostId]
    )
  }
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
    values
  )
}
