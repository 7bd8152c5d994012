/**
 * Crash plans (faults/crash-points.ts) for the fault tests and the crash campaign: armed in the
 * stack's run directory, fired once by the first component that passes the plan's point.
 */
import { existsSync } from 'node:fs'
import { rm, writeFile } from 'node:fs/promises'
import { crashPlanFile, type CrashPlan } from '../../faults/crash-points.js'
import { waitFor } from '../../stack/wait.js'

interface WithRunDir {
  paths: { runDir: string }
}

export async function armCrashPlan (stack: WithRunDir, plan: CrashPlan): Promise<void> {
  await writeFile(crashPlanFile(stack.paths.runDir), JSON.stringify(plan))
}

/** Takes back a plan that has not fired; whether it had not. */
export async function disarmCrashPlan (stack: WithRunDir): Promise<boolean> {
  const armed = crashPlanArmed(stack)
  await rm(crashPlanFile(stack.paths.runDir), { force: true })
  return armed
}

export function crashPlanArmed (stack: WithRunDir): boolean {
  return existsSync(crashPlanFile(stack.paths.runDir))
}

/** Waits until a component passed the plan's point and took the plan (it fires once). */
export async function crashPlanFired (stack: WithRunDir, what: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(what, async () => crashPlanArmed(stack) ? null : true, { timeoutMs })
}
