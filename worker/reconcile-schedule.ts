/**
 * The reconciler's Temporal Schedule, made or brought up to date by every worker at start (any
 * one of them is enough; the rest find it). A pass that would overlap a running one is skipped.
 *
 * A failure to do so (Temporal busy, a call that timed out while the worker was paused) is tried
 * again, backing off, rather than ending the worker (until-done.ts).
 */
import { Client, Connection, ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client'
import type { WorkerConfig } from '../config/index.js'
import type { Logger } from '../log/logger.js'
import { RECONCILE_SCHEDULE_ID, WORKFLOW_TYPES } from '../contract/workflows.js'
import { untilDone } from './until-done.js'

/** Gives up, leaving the schedule to the next worker to start, once `stop` is aborted. */
export async function ensureReconcileSchedule (config: WorkerConfig, logger: Logger, stop: AbortSignal): Promise<void> {
  await untilDone('make or update the reconciler schedule', async () => { await makeOrUpdateSchedule(config, logger) }, logger, stop)
}

async function makeOrUpdateSchedule (config: WorkerConfig, logger: Logger): Promise<void> {
  const connection = await Connection.connect({ address: config.temporal.address })
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace })
    const spec = { intervals: [{ every: config.reconcileEveryMs }] }
    const action = {
      type: 'startWorkflow' as const,
      workflowType: WORKFLOW_TYPES.reconcile,
      workflowId: 'vmplane-reconcile',
      taskQueue: config.temporal.taskQueue,
      args: [],
      staticSummary: 'reconcile hosts with PostgreSQL'
    }
    try {
      await client.schedule.create({ scheduleId: RECONCILE_SCHEDULE_ID, spec, action, policies: { overlap: ScheduleOverlapPolicy.SKIP } })
      logger.info({ everyMs: config.reconcileEveryMs }, 'created the reconciler schedule')
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err
      await client.schedule.getHandle(RECONCILE_SCHEDULE_ID).update((schedule) => ({ ...schedule, spec, action }))
    }
  } finally {
    await connection.close()
  }
}
