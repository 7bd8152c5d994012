/**
 * Writes to an instance's record, on behalf of the instance's workflow (its only writer, I4).
 *
 * Every change is one transaction that updates the instance row, upserts the operation it
 * belongs to, and appends one event. The event's ID is chosen by the workflow, which makes the
 * write idempotent: an activity retried after a crash finds its event and does nothing again.
 * The instance's generation is compared and bumped on every change, so a second writer, which
 * should never exist, would fail loudly instead of interleaving.
 */
import { ApplicationFailure } from '@temporalio/activity'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { crashPoint } from '../faults/crash-points.js'
import { INSTANCE_COLUMNS, VMM_COLUMNS, toInstance, toVmm } from '../db/rows.js'
import type { EventKind } from '../domain/event.js'
import type { Instance, InstanceError, InstanceState, IntendedState } from '../domain/instance.js'
import type { OperationError, OperationKind, OperationStatus } from '../domain/operation.js'
import type { VmmRecord } from '../domain/vmm.js'

export interface InstanceSnapshot {
  instance: Instance
  /** The instance's VMMs that are not confirmed gone, oldest first. */
  liveVmms: VmmRecord[]
  activeVmm: VmmRecord | null
}

export interface OperationUpdate {
  id: string
  kind: OperationKind
  status: OperationStatus
  error?: OperationError | null
  workflowId: string
  runId: string
}

/** The instance's fields a change may set. */
export interface InstanceFields {
  state?: InstanceState
  intendedState?: IntendedState
  activeVmmId?: string | null
  lastError?: InstanceError | null
  restartAttempts?: number
  restartAt?: string | null
  /** Marks the instance destroyed and releases what its VMMs still hold. */
  destroyed?: boolean
}

/** The event a change appends. */
export interface ChangeEvent {
  kind: EventKind
  message: string
  details?: Record<string, unknown>
  vmmId?: string | null
}

export interface InstanceChange extends ChangeEvent {
  instanceId: string
  /** Chosen by the workflow; a change whose event exists was already made. */
  eventId: string
  expectedGeneration: number
  set?: InstanceFields
  operation?: OperationUpdate
}

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

export async function loadInstance (pool: Pool, instanceId: string): Promise<InstanceSnapshot | null> {
  return await readSnapshot(pool, instanceId)
}

/** Applies one change; see the module comment for why it is safe to retry. */
export async function recordInstanceChange (pool: Pool, change: InstanceChange): Promise<InstanceSnapshot> {
  const snapshot = await inTransaction(pool, async (tx) => {
    const done = await tx.query('SELECT 1 FROM instance_events WHERE id = $1', [change.eventId])
    if (done.rowCount === 0) await applyChange(tx, change)
    return await readSnapshot(tx, change.instanceId)
  })
  crashPoint('change.after-commit', change.kind)
  if (snapshot === null) throw ApplicationFailure.nonRetryable(`instance ${change.instanceId} does not exist`, 'InstanceNotFound')
  return snapshot
}

async function applyChange (tx: PoolClient, change: InstanceChange): Promise<void> {
  const set = change.set ?? {}
  const updated = await tx.query(
    `UPDATE instances SET
        state = COALESCE($3, state),
        intended_state = COALESCE($4, intended_state),
        active_vmm_id = CASE WHEN $5 THEN $6::uuid ELSE active_vmm_id END,
        last_error = CASE WHEN $7 THEN $8::jsonb ELSE last_error END,
        destroyed_at = CASE WHEN $9 THEN now() ELSE destroyed_at END,
        restart_attempts = COALESCE($10, restart_attempts),
        restart_at = CASE WHEN $11 THEN $12::timestamptz ELSE restart_at END,
        generation = generation + 1,
        updated_at = now()
      WHERE id = $1 AND generation = $2
      RETURNING state`,
    [
      change.instanceId,
      change.expectedGeneration,
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
  if (updated.rowCount === 0) {
    throw ApplicationFailure.nonRetryable(
      `instance ${change.instanceId} is not at generation ${change.expectedGeneration}: it was changed by another writer`,
      'ConcurrentWrite'
    )
  }
  if (set.destroyed === true) {
    await tx.query('DELETE FROM reservations r USING vmms v WHERE r.vmm_id = v.id AND v.instance_id = $1', [change.instanceId])
  }
  if (change.operation !== undefined) await upsertOperation(tx, change.instanceId, change.operation)
  await tx.query(
    `INSERT INTO instance_events (id, instance_id, kind, state, operation_id, vmm_id, message, details)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      change.eventId,
      change.instanceId,
      change.kind,
      updated.rows[0].state,
      change.operation?.id ?? null,
      change.vmmId ?? null,
      change.message,
      change.details === undefined ? null : JSON.stringify(change.details)
    ]
  )
}

/**
 * Appends an event without changing the instance (a condition that began or ended). The event's
 * ID is the workflow's, so a retry writes it once.
 */
export async function appendEvent (pool: Pool, event: ChangeEvent & { instanceId: string, eventId: string }): Promise<void> {
  await pool.query(
    `INSERT INTO instance_events (id, instance_id, kind, state, vmm_id, message, details)
     SELECT $1, i.id, $3, i.state, $4, $5, $6 FROM instances i WHERE i.id = $2
     ON CONFLICT (id) DO NOTHING`,
    [event.eventId, event.instanceId, event.kind, event.vmmId ?? null, event.message, event.details === undefined ? null : JSON.stringify(event.details)]
  )
}

/**
 * The API inserts an operation's row when it accepts the request; the workflow upserts it,
 * so the row exists even if the API died between starting the workflow and writing it.
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
       finished_at = COALESCE(operations.finished_at, EXCLUDED.finished_at)`,
    [op.id, instanceId, op.kind, op.status, op.error == null ? null : JSON.stringify(op.error), op.workflowId, op.runId, finished]
  )
}
