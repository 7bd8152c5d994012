/**
 * Activity proxies and their retry policies, by what the activities touch.
 *
 * Nothing here gives up on its own: a PostgreSQL restart or an unreachable host is waited out
 * (unknown is not dead, I2). Only the classes that are answers — a refused request, a VMM the
 * agent affirms it does not have, a write that found another writer — stop the retries.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow'
import type { Activities } from '../activities/index.js'
import { NON_RETRYABLE_ERROR_CLASSES } from '../domain/errors.js'

/**
 * PostgreSQL: short calls, run as local activities (in the worker, recorded with the workflow
 * task that asked for them: no round trip through the server to schedule and dispatch each),
 * retried quickly, forever.
 */
export const records = proxyLocalActivities<Activities>({
  startToCloseTimeout: '5 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '5 seconds',
    nonRetryableErrorTypes: ['ConcurrentWrite', 'InstanceNotFound']
  }
})

/**
 * Calls that leave the worker for host agents (or, to fence a host, for Temporal itself): each
 * bounded by its client's timeout, retried with backoff, forever. The activities heartbeat while
 * they wait, so a worker that dies holding one is noticed within the heartbeat timeout.
 */
export const agents = proxyActivities<Activities>({
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
})

/**
 * The reconciler's work: a whole host's inventory in one call, heartbeating as it goes. A pass
 * that keeps failing gives up; the next one, a period later, starts afresh.
 */
export const reconciler = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 3 }
})

/**
 * Ends the workflow task that awaits it, for one round trip: the server hands the activity
 * straight back to this worker in the reply to that task (eager dispatch).
 */
export const taskBoundary = proxyActivities<Activities>({ startToCloseTimeout: '5 seconds' })

/** The worker's settings, read once per execution and recorded in its history. */
export const settings = proxyLocalActivities<Activities>({ startToCloseTimeout: '5 seconds' })
