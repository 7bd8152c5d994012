/**
 * Activity proxies and their timeouts, by what the activities touch.
 *
 * Every write is a regular activity (docs/design.md §8, the write path): it runs only once the
 * workflow task that decided it has completed. Local activities (`reads`) only read: an
 * execution's instance and settings (and a create's row, inserted keyed by the instance's ID from
 * the request), a host monitor's settings.
 *
 * Nothing here gives up on its own: a PostgreSQL outage or an unreachable host is waited out
 * (unknown is not dead, I2). But no activity retries forever either: each series of attempts is
 * bounded by its schedule-to-close timeout, and `persistent` then waits on a durable timer and
 * schedules a new series. Retries inside a series leave no trace in the history; each series
 * costs a handful of events, so an outage of hours grows a history by a few hundred events at
 * most. Only the classes that are answers (a refused request, a VMM the agent affirms it does
 * not have) end the retries.
 */
import {
  ActivityFailure,
  log,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  TimeoutFailure,
  type ActivityInterfaceFor
} from '@temporalio/workflow'
import type { Activities } from '../activities/index.js'
import { NON_RETRYABLE_ERROR_CLASSES } from '../domain/errors.js'

/** How long a series of attempts may take, and the durable wait before the next series. */
const SERIES_TIMEOUT = '2 minutes'
const BETWEEN_SERIES_MS = 30_000

/**
 * The same activities, each call scheduled again (after a durable wait) whenever a series of
 * attempts reaches its schedule-to-close timeout.
 */
function persistent (activities: ActivityInterfaceFor<Activities>): ActivityInterfaceFor<Activities> {
  return new Proxy(activities, {
    get (target, name: keyof Activities) {
      const call = target[name] as (...args: unknown[]) => Promise<unknown>
      return async (...args: unknown[]) => {
        for (;;) {
          try {
            return await call(...args)
          } catch (err) {
            if (!isSeriesTimeout(err)) throw err
            log.warn('activity still failing after a series of attempts; trying again after a pause', { activity: name, pauseMs: BETWEEN_SERIES_MS })
            await sleep(BETWEEN_SERIES_MS)
          }
        }
      }
    }
  })
}

function isSeriesTimeout (err: unknown): boolean {
  return err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_CLOSE'
}

/**
 * PostgreSQL: an instance's record, its VMMs and placement. The worker heartbeats while a write
 * runs (worker/activity-heartbeats.ts), so a worker that dies holding one (with eager dispatch,
 * the worker that decided it) is noticed within 2 s, not at the start-to-close timeout.
 */
export const records = persistent(proxyActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  scheduleToCloseTimeout: SERIES_TIMEOUT,
  heartbeatTimeout: '2 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '5 seconds',
    nonRetryableErrorTypes: ['InstanceNotFound']
  }
}))

/**
 * Calls that leave the worker for host agents (or, to fence a host, for Temporal itself): each
 * bounded by its client's timeout and retried with backoff. The worker heartbeats while they
 * wait, so a worker that dies holding one is noticed within the heartbeat timeout.
 */
export const agents = persistent(proxyActivities<Activities>({
  startToCloseTimeout: '20 seconds',
  scheduleToCloseTimeout: SERIES_TIMEOUT,
  heartbeatTimeout: '2 seconds',
  // An agent that restarts is back within a second or two; a stop waiting on it should not
  // wait much longer. A host that stays away costs a refused connection every 2 s.
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 1.5,
    maximumInterval: '2 seconds',
    nonRetryableErrorTypes: [...NON_RETRYABLE_ERROR_CLASSES]
  }
}))

/**
 * The reconciler's work: a whole host's inventory in one call, heartbeating as it runs. A pass
 * that keeps failing gives up; the next one, a period later, starts afresh.
 */
export const reconciler = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 3 }
})

/**
 * Reads an execution begins with, as a local activity: no round trip through the server, and
 * nothing to undo if the workflow task that ran it is retried.
 */
export const reads = persistent(proxyLocalActivities<Activities>({
  startToCloseTimeout: '5 seconds',
  scheduleToCloseTimeout: '1 minute',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' }
}))
