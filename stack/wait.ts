/**
 * Waiting for something to come up: a bounded poll that a stop can cut short.
 */
import { setTimeout as sleep } from 'node:timers/promises'

export interface WaitOptions {
  timeoutMs: number
  intervalMs?: number
  /** Aborts the wait (the stack is stopping). */
  signal?: AbortSignal
  /** Called when the time is up, for what to add to the error (a log tail, say). */
  detail?: () => Promise<string> | string
}

/** Calls `probe` until it returns something other than null, and returns that; throws once `timeoutMs` has passed. */
export async function waitFor<T> (what: string, probe: () => Promise<T | null>, options: WaitOptions): Promise<T> {
  const deadline = Date.now() + options.timeoutMs
  for (;;) {
    options.signal?.throwIfAborted()
    const found = await probe().catch(() => null)
    if (found !== null) return found
    if (Date.now() >= deadline) {
      const detail = options.detail === undefined ? '' : `\n${await options.detail()}`
      throw new Error(`${what} did not happen within ${Math.round(options.timeoutMs / 1000)} s${detail}`)
    }
    await sleep(options.intervalMs ?? 250, undefined, { signal: options.signal })
  }
}

/** Calls `check` until it returns true; throws once `timeoutMs` has passed. */
export async function waitUntil (what: string, check: () => Promise<boolean>, options: WaitOptions): Promise<void> {
  await waitFor(what, async () => (await check()) ? true : null, options)
}

/** True if `url` answers 200 within a few seconds. */
export async function answersOk (url: string): Promise<boolean> {
  const response = await fetch(url, { signal: AbortSignal.timeout(3000) })
  await response.body?.cancel()
  return response.status === 200
}
