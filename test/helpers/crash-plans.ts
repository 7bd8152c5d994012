/** Crash plans for fault tests (faults/crash-points.ts): armed in the stack's run directory, fired once. */
import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { crashPlanFile, type CrashPlan } from '../../faults/crash-points.js'
import { waitFor } from '../../scripts/dev-stack/wait.js'
import type { TestStack } from './stack.js'

export async function armCrashPlan (stack: TestStack, plan: CrashPlan): Promise<void> {
  await writeFile(crashPlanFile(stack.paths.runDir), JSON.stringify(plan))
}

/** Waits until a component passed the plan's point and took the plan (it fires once). */
export async function crashPlanFired (stack: TestStack, what: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(what, async () => existsSync(crashPlanFile(stack.paths.runDir)) ? null : true, { timeoutMs })
}
