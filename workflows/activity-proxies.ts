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
 * schedules a new series. Retries inside a series leave no trace in the history, and how often a
 * host is tried is the retry policy's (every 2 s at most for agents), whatever the series' length;
 * each series costs a handful of events. So each series of a call is twice as long as the one
 * before, from 2 minutes up to 6 hours: an outage of a day costs some 100 events, one of a year a
 * few thousand, where series of 2 minutes reached Temporal's 51,200-event limit in 9 days. Only the
 * classes that are answers (a refused request, a VMM the agent affirms it does not have) end the
 * retries.
 */
import {
  ActivityFailure,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  TimeoutFailure,
  type ActivityInterfaceFor,
  type ActivityOptions
} from '@temporalio/workflow'
import type { Activities } from '../contract/activities.js'
import { NON_RETRYABLE_ERROR_CLASSES } from '../domain/errors.js'
import { GROWING_SERIES_PATCH, SERIES_OUT_OF_TIME_PATCH } from './patches.js'

/** How long the first series of attempts may take, the longest one, and the durable wait between two. */
const FIRST_SERIES_MS = 2 * 60_000
const LONGEST_SERIES_MS = 6 * 3600_000
const BETWEEN_SERIES_MS = 30_000

/** How long the series of a call numbered `series` (from 0) may take: twice the one before, up to the longest. */
export function seriesTimeoutMs (series: number): number {
  return Math.min(FIRST_SERIES_MS * 2 ** Math.min(series, 20), LONGEST_SERIES_MS)
}

/**
 * The activities `ofSeries` gives for each series of a call (numbered from 0), each call scheduled
 * again (after a durable wait) whenever a series of attempts reaches its schedule-to-close timeout.
 */
function persistent (ofSeries: (series: number) => ActivityInterfaceFor<Activities>): ActivityInterfaceFor<Activities> {
  return new Proxy(ofSeries(0), {
    get (_target, name: keyof Activities) {
      return async (...args: unknown[]) => {
        for (let series = 0; ; series++) {
          try {
            return await (ofSeries(series)[name] as (...args: unknown[]) => Promise<unknown>)(...args)
          } catch (err) {
            if (!isSeriesTimeout(err)) throw err
            log.warn('activity still failing after a series of attempts; trying again after a pause', { activity: name, series, pauseMs: BETWEEN_SERIES_MS })
            await sleep(BETWEEN_SERIES_MS)
          }
        }
      }
    }
  })
}

/** Regular activities with `options`, their series growing (`seriesTimeoutMs`). */
function growingSeries (options: ActivityOptions): (series: number) => ActivityInterfaceFor<Activities> {
  const first = proxyActivities<Activities>({ ...options, scheduleToCloseTimeout: FIRST_SERIES_MS })
  return (series) => series > 0 && patched(GROWING_SERIES_PATCH)
    ? proxyActivities<Activities>({ ...options, scheduleToCloseTimeout: seriesTimeoutMs(series) })
    : first
}

/**
 * Whether a series of attempts ran out of time. When the next attempt would begin past the
 * schedule-to-close, Temporal ends the series with the last attempt's failure (a host that does
 * not answer: `HostUnreachable`) and the retry state `TIMEOUT`, rather than a timeout failure:
 * such a failure escaped, and failed a stop waiting on an unreachable host after 2 minutes.
 */
function isSeriesTimeout (err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false
  if (err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_CLOSE') return true
  return err.retryState === 'TIMEOUT' && patched(SERIES_OUT_OF_TIME_PATCH)
}

/**
 * PostgreSQL: an instance's record, its VMMs and placement. The worker heartbeats while a write
 * runs (worker/activity-heartbeats.ts), so a worker that dies holding one (with eager dispatch,
 * the worker that decided it) is noticed within 2 s, not at the start-to-close timeout.
 */
export const records = persistent(growingSeries({
  startToCloseTimeout: '10 seconds',
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
export const agents = persistent(growingSeries({
  startToCloseTimeout: '20 seconds',
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
const localReads = proxyLocalActivities<Activities>({
  startToCloseTimeout: '5 seconds',
  scheduleToCloseTimeout: '1 minute',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' }
})
export const reads = persistent(() => localReads)
