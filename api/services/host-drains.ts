/**
 * Cordon, drain and uncordon a host (workflows/drain-host.ts has the theory).
 *
 * A cordon alone keeps placement off the host (kubectl's cordon): what runs there stays.
 * A drain cordons the host and records the drain in one transaction, then starts its workflow,
 * `drain-<hostId>`, which takes the existing execution if one runs: asking twice drains once.
 * Uncordoning ends the cordon and tells a running drain to stop; migrations it already asked
 * for carry on as the operations they are.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client'
import { inTransaction, type Pool } from '../../db/pool.js'
import { stopDrainSignal } from '../../contract/messages.js'
import { WORKFLOW_TYPES, drainWorkflowId, type DrainHostInput } from '../../contract/workflows.js'
import { ApiProblem } from '../plugins/problem-details.js'
import type { NewId } from '../plugins/idempotency.js'

interface Dependencies {
  db: Pool
  temporal: Client
  taskQueue: string
}

export function createHostDrains ({ db, temporal, taskQueue }: Dependencies) {
  return {
    /** True if a drain began, false if one was already under way. */
    async drain (hostId: string, concurrency: number, newId: NewId): Promise<boolean> {
      const drainId = newId('drain')
      const began = await inTransaction(db, async (tx) => {
        const host = await tx.query("UPDATE hosts SET cordoned_at = COALESCE(cordoned_at, now()), cordon_reason = 'draining' WHERE id = $1 RETURNING status", [hostId])
        if (host.rowCount === 0) throw new ApiProblem(404, 'Not Found', `host ${hostId} does not exist`)
        const inserted = await tx.query(
          `INSERT INTO drains (id, host_id, status) SELECT $1, $2, 'draining'
            WHERE NOT EXISTS (SELECT 1 FROM drains WHERE host_id = $2 AND finished_at IS NULL)
           ON CONFLICT (id) DO NOTHING RETURNING id`,
          [drainId, hostId]
        )
        return inserted.rowCount !== 0
      })
      const live = await db.query('SELECT id FROM drains WHERE host_id = $1 AND finished_at IS NULL', [hostId])
      // The drain recorded, whoever recorded it: its workflow runs (again, after a crash between the two).
      if (live.rowCount !== 0) {
        const input: DrainHostInput = { hostId, drainId: live.rows[0].id, concurrency }
        await temporal.workflow.start(WORKFLOW_TYPES.drain, {
          workflowId: drainWorkflowId(hostId),
          taskQueue,
          args: [input],
          workflowIdConflictPolicy: 'USE_EXISTING',
          staticSummary: `drain ${hostId}, ${concurrency} migration(s) at a time`
        })
      }
      return began
    },

    /** Cordons the host without draining it: nothing new is placed there; what runs stays. */
    async cordon (hostId: string): Promise<void> {
      const host = await db.query("UPDATE hosts SET cordoned_at = COALESCE(cordoned_at, now()), cordon_reason = COALESCE(cordon_reason, 'cordoned') WHERE id = $1", [hostId])
      if (host.rowCount === 0) throw new ApiProblem(404, 'Not Found', `host ${hostId} does not exist`)
    },

    /**
     * Ends the cordon and any drain; 404 for a host that does not exist. A drain's record is open
     * before its workflow starts and until it ends, so without one there is nothing to signal
     * (and a cordon alone is ended without Temporal).
     */
    async uncordon (hostId: string): Promise<void> {
      const host = await db.query<{ draining: boolean }>(`UPDATE hosts SET cordoned_at = NULL, cordon_reason = NULL WHERE id = $1
        RETURNING EXISTS (SELECT 1 FROM drains WHERE host_id = $1 AND finished_at IS NULL) AS draining`, [hostId])
      if (host.rowCount === 0) throw new ApiProblem(404, 'Not Found', `host ${hostId} does not exist`)
      if (!host.rows[0]!.draining) return
      try {
        await temporal.workflow.getHandle(drainWorkflowId(hostId)).signal(stopDrainSignal)
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err
        // No drain runs; one that ended and left its record open is closed here.
        await db.query("UPDATE drains SET status = 'stopped', finished_at = now() WHERE host_id = $1 AND finished_at IS NULL", [hostId])
      }
    }
  }
}
