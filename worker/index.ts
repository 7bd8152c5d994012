/**
 * The worker: every workflow and activity of vmplane, on one task queue.
 *
 * Workers are stateless: any number of them may run, and one that dies loses nothing, since
 * Temporal hands its workflow tasks and activities to another (or to it, once restarted).
 */
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker'
import type { WorkerConfig } from '../config/index.js'
import { createPool, type Pool } from '../db/pool.js'
import { createActivities } from '../activities/index.js'
import type { Activities } from '../contract/activities.js'
import type { Logger } from '../log/logger.js'
import { heartbeatWhileRunning } from './activity-heartbeats.js'
import { ensureReconcileSchedule } from './reconcile-schedule.js'
import { WORKER_TUNING } from './tuning.js'
import { untilDone } from './until-done.js'
import { WORKFLOW_BUNDLE_PATH } from './workflow-bundle.js'

const TEMPORAL_LOG_LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error'
}

/**
 * Routes the SDK's own logs (workflow and activity loggers included) into pino, and serves the
 * SDK's metrics, with the operation outcomes the workflows emit (workflows/metrics.ts), to
 * Prometheus.
 */
function installRuntime (logger: Logger, metricsAddress: string): void {
  Runtime.install({
    telemetryOptions: {
      metrics: { prometheus: { bindAddress: metricsAddress, useSecondsForDurations: true } }
    },
    logger: new DefaultLogger('INFO', (entry) => {
      logger[TEMPORAL_LOG_LEVELS[entry.level]]({ ...entry.meta }, entry.message)
    })
  })
}

/**
 * Runs the worker until the SDK's runtime shuts it down (SIGINT or SIGTERM). `stop`, aborted by
 * those signals too, ends the start-up's tries: the runtime shuts down only workers it runs.
 */
export async function runWorker (config: WorkerConfig, logger: Logger, stop: AbortSignal): Promise<void> {
  installRuntime(logger, config.metricsAddress)
  const pool = createPool(config.databaseUrl)
  try {
    // Temporal may be restarting as this worker starts: waited for, not a crash.
    const made = await untilDone('connect to Temporal and make the worker', async () => await connectedWorker(config, pool), logger, stop)
    if (made === null) return
    const { connection, worker } = made
    try {
      await ensureReconcileSchedule(config, logger, stop)
      logger.info({ taskQueue: config.temporal.taskQueue, address: config.temporal.address }, 'worker polling')
      // Ends at once if the signal came already: the SDK's runtime took it, and shuts down a
      // worker that starts running after it.
      await worker.run()
    } finally {
      await connection.close()
    }
  } finally {
    await pool.end()
  }
}

/** A connection to Temporal and the worker on it (whose making asks Temporal about the namespace). */
async function connectedWorker (config: WorkerConfig, pool: Pool): Promise<{ connection: NativeConnection, worker: Worker }> {
  const connection = await NativeConnection.connect({ address: config.temporal.address })
  try {
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH },
      interceptors: { activity: [heartbeatWhileRunning] },
      ...WORKER_TUNING,
      activities: workerActivities(config, pool)
    })
    return { connection, worker }
  } catch (err) {
    await connection.close()
    throw err
  }
}

/** The activities as the worker's configuration makes them (tests run them on workers of their own). */
export function workerActivities (config: WorkerConfig, pool: Pool): Activities {
  return createActivities({
    pool,
    agentToken: config.agentToken,
    agentCallTimeoutMs: config.agentCallTimeoutMs,
    settings: {
      bootTimeoutMs: config.bootTimeoutMs,
      placementTimeoutMs: config.placementTimeoutMs,
      killBackstopMs: config.killBackstopMs,
      hostUnreachableAfterMs: config.hostUnreachableAfterMs,
      restartBackoffMs: config.restartBackoffMs,
      restartBackoffMaxMs: config.restartBackoffMaxMs,
      restartResetMs: config.restartResetMs,
      orphanGraceMs: config.orphanGraceMs,
      migration: config.migration,
      history: config.history,
      lease: config.lease
    }
  })
}
