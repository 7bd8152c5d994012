/**
 * Closed-loop load: `concurrency` clients, each taking the next item as soon as its last one is
 * done, until every item has been through `operation`. Every operation is timed; a failed one is
 * counted with its message, never timed.
 */
import { percentile, round } from './stats.js'

export interface LoadFigures {
  operations: number
  concurrency: number
  failures: number
  /** The first few failures' messages. */
  failureSamples: string[]
  seconds: number
  perS: number
  p50Ms: number
  p99Ms: number
}

export async function runLoad<T> (items: readonly T[], concurrency: number, operation: (item: T) => Promise<unknown>): Promise<LoadFigures> {
  const latencies: number[] = []
  const failureSamples: string[] = []
  let failures = 0
  let next = 0
  const began = performance.now()
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++]
      const at = performance.now()
      try {
        await operation(item)
        latencies.push(performance.now() - at)
      } catch (error) {
        failures++
        if (failureSamples.length < 5) failureSamples.push(describeFailure(error))
      }
    }
  }))
  const seconds = (performance.now() - began) / 1000
  return {
    operations: items.length,
    concurrency,
    failures,
    failureSamples,
    seconds: round(seconds, 2),
    perS: round(latencies.length / seconds, 2),
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99))
  }
}

/**
 * An error's message with its causes: fetch says only "fetch failed", and what failed (a reset,
 * a socket the other side closed) is in its cause.
 */
function describeFailure (error: unknown): string {
  const parts: string[] = []
  for (let at: unknown = error; at !== undefined && parts.length < 4; at = at instanceof Error ? at.cause : undefined) {
    parts.push(at instanceof Error ? `${at.message}${'code' in at ? ` (${String(at.code)})` : ''}` : String(at))
  }
  return parts.join(': ')
}
