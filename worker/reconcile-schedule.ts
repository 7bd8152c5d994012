/**
 * The reconciler's Temporal Schedule, made or brought up to date by every worker at start (any
 * one of them is enough; the rest find it). A pass that would overlap a running one is skipped.
 *
 * A failure to do so (Temporal busy, a call that timed out while the worker was paused) is tried
 * again, backing off, rather than ending the worker: a worker that exits at start comes back to
 * the same call, and its supervisor's log then shows a crash where there was only weather.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Client, Connection, ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client'
import type { WorkerConfig } from '../config/index.js'
import type { Logger } from '../log/logger.js'
import { RECONCILE_SCHEDULE_ID, WORKFLOW_TYPES } from '../workflows/definitions.js'

const FIRST_RETRY_MS = 500
const MAX_RETRY_MS = 15_000

export async function ensureReconcileSchedule (config: WorkerConfig, logger: Logger): Promise<void> {
  for (let delayMs = FIRST_RETRY_MS; ; delayMs = Math.min(2 * delayMs, MAX_RETRY_MS)) {
    try {
      await makeOrUpdateSchedule(config, logger)
      return
    } catch (err) {
      logger.warn({ err }, `could not make or update the reconciler schedule; trying again in ${delayMs / 1000} s`)
      await sleep(delayMs)
    }
  }
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
