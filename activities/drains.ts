/**
 * What a host drain (workflows/drain-host.ts) reads and writes: the instances with a VMM alive on
 * the host, the migrate operations it asks for, their outcomes, and its progress for `GET /v1/hosts`.
 *
 * A migration is asked for the way the API asks for one (api/services/instance-requests.ts): a
 * `migrateInstance` execution under the instance's workflow ID, which fails to start while
 * another operation holds that ID (the drain tries again later), then the operation's row. The
 * operation's ID is chosen by the drain and recorded in its history before this runs, so a retry
 * finds the operation it started.
 *
 * The statements are db/'s (db/instances.ts, db/operations.ts, db/drains.ts).
 */
import { activityInfo, getClient } from '@temporalio/activity'
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client'
import type { DrainActivities } from '../contract/activities.js'
import { WORKFLOW_TYPES, operationStart } from '../contract/workflows.js'
import { upsertDrainProgress } from '../db/drains.js'
import { instancesWithLiveVmmOn } from '../db/instances.js'
import { finishedOperationOutcomes, insertOperation, operationExists } from '../db/operations.js'
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
      return await instancesWithLiveVmmOn(pool, hostId)
    },

    /** Starts the migrate operation unless it exists; `busy` while another operation holds the instance. */
    async requestMigration (request, instance) {
      if (await operationExists(pool, request.operationId)) return 'started'
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
      return await finishedOperationOutcomes(pool, operationIds)
    },

    async recordDrainProgress (hostId, progress) {
      await upsertDrainProgress(pool, hostId, progress)
    }
  }
}
