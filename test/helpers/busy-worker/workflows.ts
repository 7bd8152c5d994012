/**
 * A workflow whose one activation keeps the workflow thread busy, in the sandbox's microtasks,
 * for as many rounds as it is asked: a test can freeze the worker while an activation is surely
 * in flight (test/faults/frozen-activation.test.ts).
 */
import { CancellationScope } from '@temporalio/workflow'

/** Work enough for a round to take about a millisecond; the modulus keeps the sum a small integer. */
const ROUND_STEPS = 1_000_000

export async function busyActivation (rounds: number): Promise<number> {
  let sum = 0
  for (let round = 0; round < rounds; round++) {
    // Each round runs as a microtask of the sandbox inside a cancellation scope, as vmplane's
    // workflow code after an await does, with the SDK's AsyncLocalStorage in play.
    sum = await CancellationScope.nonCancellable(async () => {
      await Promise.resolve()
      let roundSum = sum
      for (let step = 0; step < ROUND_STEPS; step++) roundSum = (roundSum + step) % 1_000_003
      return roundSum
    })
  }
  return sum
}
