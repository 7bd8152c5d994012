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
        if (failureSamples.length < 5) failureSamples.push(error instanceof Error ? error.message : String(error))
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
