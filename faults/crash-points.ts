/**
 * Crash points: how the fault tests kill a component at a chosen step of an operation.
 *
 * Inert unless `VMPLANE_CRASH_POINTS` names the dev stack's run directory (only fault tests set
 * it). Then, when the code passes `crashPoint(name)`, it looks for `<run dir>/crash-plan.json`:
 * `{"point": "<name>", "kill": "<component>"}`. If the plan names this point, the plan is removed
 * (it fires once) and the named component — this process or another: worker, api, temporal,
 * postgres, agent-host-1, … — is sent SIGKILL by the PID in its `<run dir>/<component>.pid`. The
 * dev stack's supervisor then restarts it, as a service manager would.
 *
 * A plan is taken only while its victim runs: between a kill and the restart, the victim has no
 * PID file, and the plan waits for a later pass (a campaign's random kill can land between the
 * plan's arming and its point). A crash point never throws: it sits in the code under test, and
 * its own failure, thrown there, failed the devices of a VMM the plan had nothing to do with.
 *
 * The points sit right after a side effect and before it is acknowledged: the moment a crash is
 * most likely to leave something behind.
 */
import { readFileSync, unlinkSync } from 'node:fs'
import { join } from 'node:path'

export const CRASH_POINTS = [
  /** API: the create's workflow started, its database transaction not yet committed. */
  'create.after-workflow-start',
  /** Worker: a new VMM's placement (row and reservation) committed. */
  'place.after-commit',
  /** Worker: the agent created the VMM; the activity has not returned. */
  'ensure.after-agent',
  /** Worker: the agent took a stop's power-button press and deadline. */
  'press.after-agent',
  /** Worker: the agent started a reboot. */
  'reboot.after-agent',
  /** Worker: the agent killed and cleaned up a VMM. */
  'destroy.after-agent',
  /** Worker: the source's agent took a migration's send; the activity has not returned. */
  'send.after-agent',
  /** Worker: the target's agent answered a migration's cancel (killed the target, or found it committed). */
  'cancel.after-agent',
  /** Worker: an instance change (state, event, operation) committed. */
  'change.after-commit',
  /** Worker: a migration's commit (the target made the active VMM) committed. */
  'migrate.after-commit',
  /** Agent: a new VMM's record is on disk; its process is not spawned yet. */
  'agent.ensure.after-record',
  /** Agent: a new VMM's process is spawned; the VM is not booted yet. */
  'agent.ensure.after-spawn',
  /** Agent: a stop's deadline is recorded. */
  'agent.stop.after-deadline',
  /** Agent: a VMM killed on request; its end not yet recorded. */
  'agent.destroy.after-kill',
  /** Agent: an instance disk made in the storage directory; the VMM not spawned yet. */
  'agent.disk.after-create',
  /** Agent: a network's segment (bridge and VXLAN device) made, its TAP not yet; the VMM not spawned yet. */
  'agent.segment.after-create',
  /** Agent: a TAP made and not yet attached or UP; the VMM not spawned yet. */
  'agent.tap.after-create',
  /** Agent: a migration target's process is spawned; `vm.receive-migration` is not issued yet. */
  'agent.migration.after-target-spawn',
  /** Agent: a migration target's receive is issued and it listens (phase `ready` recorded). */
  'agent.migration.after-receive',
  /** Agent: a migration source's `vm.send-migration` is issued and its acceptance recorded. */
  'agent.migration.after-send'
] as const
export type CrashPoint = (typeof CRASH_POINTS)[number]

export interface CrashPlan {
  point: CrashPoint
  /** The component to signal, by the name of its PID file. */
  kill: string
  /** SIGKILL unless told otherwise; SIGSTOP freezes the component until the test resumes it. */
  signal?: 'SIGKILL' | 'SIGSTOP'
  /** Fires only where the point passes this detail (at change.after-commit: the change's kind). */
  when?: string
  /** Fires only in the agent of this host (VMPLANE_HOST_ID): with `kill` naming it, an agent killed at its own point. */
  host?: string
}

const runDir = process.env.VMPLANE_CRASH_POINTS ?? null

export function crashPlanFile (dir: string): string {
  return join(dir, 'crash-plan.json')
}

/** The plan for this point, taken (it fires once), with its victim's PID; null if none, or if the victim is not running. */
function takePlan (point: CrashPoint, detail: string | undefined): { plan: CrashPlan, pid: number } | null {
  if (runDir === null) return null
  let plan: CrashPlan
  try {
    plan = JSON.parse(readFileSync(crashPlanFile(runDir), 'utf8'))
  } catch {
    return null
  }
  if (plan.point !== point || (plan.when !== undefined && plan.when !== detail)) return null
  if (plan.host !== undefined && plan.host !== process.env.VMPLANE_HOST_ID) return null
  const pid = runningPid(join(runDir, `${plan.kill}.pid`))
  if (pid === null) return null
  try {
    unlinkSync(crashPlanFile(runDir))
  } catch {
    return null // another process took it first
  }
  return { plan, pid }
}

/** The PID a PID file names, if that process runs. */
function runningPid (file: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(file, 'utf8'), 10)
    process.kill(pid, 0)
    return pid
  } catch {
    return null
  }
}

/** Signals the planned component if the crash plan names this point; does nothing otherwise, and never throws. */
export function crashPoint (point: CrashPoint, detail?: string): void {
  const taken = takePlan(point, detail)
  if (taken === null) return
  const { plan, pid } = taken
  const signal = plan.signal ?? 'SIGKILL'
  process.stderr.write(`crash point ${point}: ${signal} to ${plan.kill} (pid ${pid})\n`)
  try {
    process.kill(pid, signal)
  } catch (err) {
    // It ended since it was found running: what the plan wanted, by another hand.
    process.stderr.write(`crash point ${point}: ${plan.kill} (pid ${pid}) had ended: ${(err as Error).message}\n`)
  }
}
