/**
 * The `operations` table (docs/design.md §9). The row of an accepted operation is written by
 * whoever starts its workflow (the API, a host's drain, the reconciler) once the workflow has
 * it — and by the workflow itself too: whichever comes first creates it. Its outcome is recorded
 * by its execution (`upsertOperation`), or by the reconciler when no execution runs it any more
 * (`closeOperationAsInterrupted`).
 *
 * The starter's insert and the execution's upsert both lock the instance's row before they touch
 * the operation's, so they queue instead of deadlocking: the workflow's change locks the instance
 * first (activities/instance-records.ts), and a plain insert here would take the operation's key
 * first and the instance (its foreign key) second.
 */
import { instanceWorkflowId } from '../domain/ids.js'
import type { Operation, OperationError } from '../domain/operation.js'
import type { OperationRequest } from '../domain/requests.js'
import { OPERATION_COLUMNS, toOperation } from './rows.js'
import type { PoolClient, Queryable } from './pool.js'

function paramsOf (request: OperationRequest): Record<string, unknown> {
  switch (request.kind) {
    case 'stop':
    case 'delete': return { graceSeconds: request.graceSeconds }
    case 'migrate': return request.targetHostId === undefined ? {} : { targetHostId: request.targetHostId }
    default: return {}
  }
}

export async function insertOperation (db: Queryable, request: OperationRequest, runId: string): Promise<void> {
  await db.query(
    `INSERT INTO operations (id, instance_id, kind, status, params, workflow_id, run_id, started_at)
     SELECT $1, i.id, $3, 'running', $4, $5, $6, $7 FROM instances i WHERE i.id = $2 FOR KEY SHARE
     ON CONFLICT (id) DO NOTHING`,
    [request.operationId, request.instanceId, request.kind, JSON.stringify(paramsOf(request)), instanceWorkflowId(request.instanceId), runId, request.requestedAt]
  )
}

/** An operation's step as its execution records it: its status, and its outcome once over. */
export interface OperationStep extends Pick<Operation, 'id' | 'kind' | 'status' | 'workflowId'> {
  runId: string
  error?: OperationError | null
}

/**
 * The API inserts an operation's row when it accepts the request; the workflow upserts it, so
 * the row exists even if the API died between starting the workflow and writing it. An outcome
 * once recorded is final: a later change cannot turn a finished operation back to running, nor
 * give it another outcome.
 */
export async function upsertOperation (tx: PoolClient, instanceId: string, op: OperationStep): Promise<void> {
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

export async function readOperation (db: Queryable, id: string): Promise<Operation | null> {
  const { rows } = await db.query(`SELECT ${OPERATION_COLUMNS} FROM operations o WHERE o.id = $1`, [id])
  return rows.length === 0 ? null : toOperation(rows[0])
}

export async function operationExists (db: Queryable, id: string): Promise<boolean> {
  const known = await db.query('SELECT 1 FROM operations WHERE id = $1', [id])
  return known.rowCount !== 0
}

/** The outcome of each of these operations that has ended, by ID (its error's message only). */
export async function finishedOperationOutcomes (db: Queryable, ids: string[]): Promise<Record<string, { status: string, error: string | null }>> {
  const { rows } = await db.query(
    "SELECT id, status, error->>'message' AS error FROM operations WHERE id = ANY($1::uuid[]) AND finished_at IS NOT NULL",
    [ids]
  )
  return Object.fromEntries(rows.map((r) => [r.id, { status: r.status, error: r.error }]))
}

/** An operation in flight, with the run that accepted it (or last recorded it). */
export interface OperationInFlight {
  id: string
  kind: string
  instance_id: string
  workflow_id: string
  run_id: string | null
}
const OPERATION_IN_FLIGHT = 'id, kind, instance_id, workflow_id, run_id'

/** Operations in flight that started more than `graceMs` ago, oldest first, 500 at most. */
export async function operationsInFlightFor (db: Queryable, graceMs: number): Promise<OperationInFlight[]> {
  const { rows } = await db.query(
    `SELECT ${OPERATION_IN_FLIGHT} FROM operations
      WHERE finished_at IS NULL AND started_at < now() - $1 * interval '1 millisecond'
      ORDER BY started_at LIMIT 500`,
    [graceMs]
  )
  return rows
}

export async function operationsInFlightOf (db: Queryable, instanceId: string): Promise<OperationInFlight[]> {
  const { rows } = await db.query(`SELECT ${OPERATION_IN_FLIGHT} FROM operations WHERE instance_id = $1 AND finished_at IS NULL`, [instanceId])
  return rows
}

/**
 * Ends an operation in flight as interrupted, saying why, unless it moved on: the run is named,
 * so an operation a new run carries is never touched. Whether it was ended.
 */
export async function closeOperationAsInterrupted (db: Queryable, op: OperationInFlight, why: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE operations SET status = 'failed', finished_at = now(), error = $3
      WHERE id = $1 AND run_id IS NOT DISTINCT FROM $2 AND finished_at IS NULL`,
    [op.id, op.run_id, JSON.stringify({ code: 'Interrupted', message: why })]
  )
  return rowCount === 1
}
