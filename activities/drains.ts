/**
 * What a host drain (workflows/drain-host.ts) reads and writes: the instances with a VMM alive on
 * the host, the migrate operations it asks for, their outcomes, and its progress for `GET /v1/hosts`.
 *
 * A migration is asked for the way the API asks for one (api/services/instance-requests.ts): a
 * `migrateInstance` execution under the instance's workflow ID, which fails to start while
 * another operation holds that ID (the drain tries again later), then the operation's row. The
 * operation's ID is chosen by the drain and recorded in its history before this runs, so a retry
 * finds the operation it started.
 */
import { activityInfo, getClient } from '@temporalio/activity'
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client'
import type { DrainActivities } from '../contract/activities.js'
import { WORKFLOW_TYPES, operationStart } from '../contract/workflows.js'
import { insertOperation } from '../db/operations.js'
import type { Pool } from '../db/pool.js'

export function createDrains (pool: Pool): DrainActivities {
  return {
    /**
     * Instances with a live VMM on the host: the drain's host is empty only when this is. Most
     * have their active VMM there, to be moved; the rest (`activeElsewhere`) have a migration's
     * other half there, its target placed before the cordon or its source not gone yet after the
     * commit, which that migration, or the kill of its source, ends. A destroyed instance counts
     * too should a VMM of its still live (the reconciler reaps it): a VM would run there.
     */
    async instancesOnHost (hostId) {
      const { rows } = await pool.query(
        `SELECT i.id, i.name, i.state, bool_and(v.id IS DISTINCT FROM i.active_vmm_id) AS "activeElsewhere"
           FROM instances i JOIN vmms v ON v.instance_id = i.id
          WHERE v.host_id = $1 AND v.state NOT IN ('destroyed', 'failed', 'lost')
          GROUP BY i.id
          ORDER BY i.created_at, i.id`,
        [hostId]
      )
      return rows
    },

    /** Starts the migrate operation unless it exists; `busy` while another operation holds the instance. */
    async requestMigration (request, instance) {
      const known = await pool.query('SELECT 1 FROM operations WHERE id = $1', [request.operationId])
      if (known.rowCount !== 0) return 'started'
      let runId: string
      try {
        const options = operationStart(request, instance, activityInfo().taskQueue)
        runId = (await getClient().workflow.start(WORKFLOW_TYPES.migrate, { ...options, workflowIdConflictPolicy: 'FAIL' })).firstExecutionRunId
      } catch (err) {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return 'busy'
        throw err
      }
      await insertOperation(pool, request, runId)
      return 'started'
    },

    /** The outcome of each operation that has ended, by ID. */
    async operationOutcomes (operationIds) {
      const { rows } = await pool.query(
        "SELECT id, status, error->>'message' AS error FROM operations WHERE id = ANY($1::uuid[]) AND finished_at IS NOT NULL",
        [operationIds]
      )
      return Object.fromEntries(rows.map((r) => [r.id, { status: r.status, error: r.error }]))
    },

    async recordDrainProgress (hostId, progress) {
      await pool.query(
        `INSERT INTO drains (id, host_id, status, total, migrated, failed, last_error, finished_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $3 <> 'draining' THEN now() END)
         ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, total = EXCLUDED.total, migrated = EXCLUDED.migrated,
           failed = EXCLUDED.failed, last_error = EXCLUDED.last_error, finished_at = EXCLUDED.finished_at
         WHERE drains.finished_at IS NULL`,
        [progress.drainId, hostId, progress.status, progress.total, progress.migrated, progress.failed, progress.lastError]
      )
    }
  }
}
