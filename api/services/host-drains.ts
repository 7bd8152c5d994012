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
import { closeOpenDrain, openDrain, openDrainOf } from '../../db/drains.js'
import { cordonForDrain, cordonHost, uncordonHost } from '../../db/hosts.js'
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
        if (!await cordonForDrain(tx, hostId)) throw notFound(hostId)
        return await openDrain(tx, drainId, hostId)
      })
      const liveDrainId = await openDrainOf(db, hostId)
      // The drain recorded, whoever recorded it: its workflow runs (again, after a crash between the two).
      if (liveDrainId !== null) {
        const input: DrainHostInput = { hostId, drainId: liveDrainId, concurrency }
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
      if (!await cordonHost(db, hostId)) throw notFound(hostId)
    },

    /**
     * Ends the cordon and any drain; 404 for a host that does not exist. A drain's record is open
     * before its workflow starts and until it ends, so without one there is nothing to signal
     * (and a cordon alone is ended without Temporal).
     */
    async uncordon (hostId: string): Promise<void> {
      const host = await uncordonHost(db, hostId)
      if (host === null) throw notFound(hostId)
      if (!host.draining) return
      try {
        await temporal.workflow.getHandle(drainWorkflowId(hostId)).signal(stopDrainSignal)
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err
        // No drain runs; one that ended and left its record open is closed here.
        await closeOpenDrain(db, hostId)
      }
    }
  }
}

function notFound (hostId: string): ApiProblem {
  return new ApiProblem(404, 'Not Found', `host ${hostId} does not exist`)
}
