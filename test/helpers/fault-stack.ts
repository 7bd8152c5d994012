/**
 * What the fault matrices share: a stack whose components pass crash points
 * (faults/crash-points.ts), whose reconciler runs often with a short orphan grace, and whose
 * killed components restart without backing off; and the wait for it to hold every invariant
 * again after a crash (test/helpers/invariants.ts).
 */
import { checkInvariants, violationsOf, type InvariantReport } from './invariants.js'
import { waitFor } from '../../stack/wait.js'
import { startStack, type TestStack } from './stack.js'
import { temporalTrouble } from './temporal-trouble.js'

/** What each case waits for at most: a restart, Temporal's timeouts, a reconcile pass. */
export const CASE_TIMEOUT_MS = 120_000

export async function startFaultStack (hosts: number, env: Record<string, string> = {}): Promise<TestStack> {
  return await startStack({
    hosts,
    env: {
      VMPLANE_CRASH_POINTS: '1',
      VMPLANE_HOST_VCPUS: '1024',
      VMPLANE_ORPHAN_GRACE_SECONDS: '5',
      VMPLANE_RECONCILE_SECONDS: '10',
      // Every kill here is on purpose: restarted after 250 ms each time, not backed off as a crash loop.
      VMPLANE_MAX_RESTART_DELAY_MS: '250',
      ...env
    }
  })
}

/** Waits until the stack holds every invariant, and returns what the check found (or says what Temporal went through). */
export async function settled (stack: TestStack): Promise<InvariantReport> {
  let last: InvariantReport | null = null
  return await waitFor('the stack to hold every invariant', async () => {
    last = await checkInvariants(stack.info)
    return violationsOf(last).length === 0 ? last : null
  }, { timeoutMs: CASE_TIMEOUT_MS, intervalMs: 500, detail: async () => `${violationsOf(last ?? {} as InvariantReport).join('\n')}\n${await temporalTrouble(stack)}` })
}
