/**
 * The row of an accepted operation, written by whoever starts its workflow (the API, the
 * reconciler) once the workflow has it — and by the workflow itself too: whichever comes first
 * creates it.
 */
import { instanceWorkflowId } from '../domain/ids.js'
import type { OperationRequest } from '../domain/requests.js'
import type { Pool, PoolClient } from './pool.js'

function paramsOf (request: OperationRequest): Record<string, unknown> {
  return request.kind === 'stop' || request.kind === 'delete' ? { graceSeconds: request.graceSeconds } : {}
}

export async function insertOperation (db: Pool | PoolClient, request: OperationRequest, runId: string): Promise<void> {
  await db.query(
    `INSERT INTO operations (id, instance_id, kind, status, params, workflow_id, run_id, started_at)
     VALUES ($1, $2, $3, 'running', $4, $5, $6, $7)
     ON CONFLICT (id) DO NOTHING`,
    [request.operationId, request.instanceId, request.kind, JSON.stringify(paramsOf(request)), instanceWorkflowId(request.instanceId), runId, request.requestedAt]
  )
}
