/**
 * What a worker does at start against Temporal, tried again, backing off, until it is done,
 * rather than ending the worker: a worker that exits at start (Temporal restarting, or its
 * database) comes back to the same call, and its supervisor's log then shows a crash where there
 * was only weather. A SIGINT or SIGTERM meanwhile ends the tries, and the worker with them.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from '../log/logger.js'

const FIRST_RETRY_MS = 500
const MAX_RETRY_MS = 15_000

/**
 * `work()`'s result, once a call of it has not thrown; each failure is logged as `could not <what>`.
 * Null once `stop` is aborted (the worker asked to end while Temporal is away): no more tries.
 */
export async function untilDone<T> (what: string, work: () => Promise<T>, logger: Logger, stop: AbortSignal): Promise<T | null> {
  for (let delayMs = FIRST_RETRY_MS; !stop.aborted; delayMs = Math.min(2 * delayMs, MAX_RETRY_MS)) {
    try {
      return await work()
    } catch (err) {
      logger.warn({ err }, `could not ${what}; trying again in ${delayMs / 1000} s`)
      // Rejects only when `stop` is aborted, which ends the loop.
      await sleep(delayMs, undefined, { signal: stop }).catch(() => {})
    }
  }
  return null
}
