/**
 * The row of an accepted operation, written by whoever starts its workflow (the API, the
 * reconciler) once the workflow has it — and by the workflow itself too: whichever comes first
 * creates it.
 *
 * Both lock the instance's row before they touch the operation's, so they queue instead of
 * deadlocking: the workflow's change locks the instance first (activities/instance-records.ts),
 * and a plain insert here would take the operation's key first and the instance (its foreign
 * key) second.
 */
import { instanceWorkflowId } from '../domain/ids.js'
import type { OperationRequest } from '../domain/requests.js'
import type { Pool, PoolClient } from './pool.js'

function paramsOf (request: OperationRequest): Record<string, unknown> {
  switch (request.kind) {
    case 'stop':
    case 'delete': return { graceSeconds: request.graceSeconds }
    case 'migrate': return request.targetHostId === undefined ? {} : { targetHostId: request.targetHostId }
    default: return {}
  }
}

export async function insertOperation (db: Pool | PoolClient, request: OperationRequest, runId: string): Promise<void> {
  await db.query(
    `INSERT INTO operations (id, instance_id, kind, status, params, workflow_id, run_id, started_at)
     SELECT $1, i.id, $3, 'running', $4, $5, $6, $7 FROM instances i WHERE i.id = $2 FOR KEY SHARE
     ON CONFLICT (id) DO NOTHING`,
    [request.operationId, request.instanceId, request.kind, JSON.stringify(paramsOf(request)), instanceWorkflowId(request.instanceId), runId, request.requestedAt]
  )
}
