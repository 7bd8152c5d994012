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
 * PostgreSQL: short calls, retried quickly, forever. A short timeout matters when a worker dies
 * holding one: its retry waits for the timeout.
 */
export const records = proxyActivities<Activities>({
  startToCloseTimeout: '5 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '5 seconds',
    nonRetryableErrorTypes: ['ConcurrentWrite', 'InstanceNotFound']
  }
})

/**
 * Host agents: each call bounded by the client's timeout, retried with backoff, forever. The
 * activities heartbeat while they wait for the agent, so a worker that dies holding one is noticed
 * within the heartbeat timeout, not the call's.
 */
export const agents = proxyActivities<Activities>({
  startToCloseTimeout: '20 seconds',
  heartbeatTimeout: '3 seconds',
  retry: {
    initialInterval: '500 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '10 seconds',
    nonRetryableErrorTypes: [...NON_RETRYABLE_ERROR_CLASSES]
  }
})

/** The worker's settings, read once per execution and recorded in its history. */
export const settings = proxyLocalActivities<Activities>({ startToCloseTimeout: '5 seconds' })
