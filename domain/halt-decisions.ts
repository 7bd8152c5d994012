/**
 * What a stop or delete decides from what it knows: the pure half of workflows/halt.ts, which has
 * the theory of operation and carries these decisions out.
 *
 * - `nextStopStep`: a stop's escalation for one VMM, from the halt's deadline and the deadline
 *   its agent was told: press the power button (telling the agent the deadline), wait, or kill.
 * - `haltEnd`: how the halt's VMMs ended, for people and as the instance's `lastError`.
 */
import type { VmmRecord } from './vmm.js'

/** Where a stop of one VMM stands (epoch ms). */
export interface StopFacts {
  now: number
  /** The halt's deadline; null when none is left to wait for (the VMM is killed at once). */
  deadline: number | null
  /** The deadline the VMM's agent was last told, if any. */
  toldAgent: number | null
  /** How long past a deadline the agent was told the kill waits for the agent's own report. */
  killBackstopMs: number
}

/**
 * Kill now, or (telling the agent the deadline first when it lies ahead) wait until `killAt`
 * for the VMM to end. The agent kills the VMM itself at a deadline it was told, so the kill
 * branch waits a backstop longer for its report; at a deadline it was not told (it passed before
 * it could be), the kill branch comes at the deadline.
 */
export type StopStep = { kill: true } | { kill: false, tellAgent: number | null, killAt: number }

export function nextStopStep (facts: StopFacts): StopStep {
  const { now, deadline } = facts
  if (deadline === null) return { kill: true }
  const ahead = deadline > now
  const told = ahead ? deadline : facts.toldAgent
  const killAt = told === deadline ? deadline + facts.killBackstopMs : deadline
  if (now >= killAt) return { kill: true }
  return { kill: false, tellAgent: ahead && facts.toldAgent !== deadline ? deadline : null, killAt }
}

/** How the halt was asked for: by an operator's force-stop, or with the earliest grace period. */
export interface HaltAsked {
  forcedBy: string | undefined
  graceSeconds: number
}

/**
 * How the VMMs of a halt ended: a VMM fenced with its lost host (`HostLost`), killed
 * (`StopForced`, naming the grace period or the operator), one that died on its own during the
 * stop, or a guest that powered off. Only the first two are errors: the stop was not graceful.
 */
export function haltEnd (vmms: ReadonlyArray<Pick<VmmRecord, 'state' | 'hostId' | 'exit' | 'reason'>>, asked: HaltAsked): { message: string, error: { code: 'HostLost' | 'StopForced', message: string } | null } {
  if (vmms.length === 0) return { message: 'no VMM was running', error: null }
  const lost = vmms.find((v) => v.state === 'lost')
  if (lost !== undefined) {
    const message = `host ${lost.hostId} declared lost; VMM fenced, not seen to stop`
    return { message, error: { code: 'HostLost', message } }
  }
  if (vmms.some((v) => v.exit?.cause === 'killed' || v.exit?.cause === 'stop-deadline')) {
    const message = asked.forcedBy !== undefined
      ? `forced by ${asked.forcedBy}; VMM killed`
      : `grace period of ${asked.graceSeconds} s expired; VMM killed`
    return { message, error: { code: 'StopForced', message } }
  }
  const died = vmms.find((v) => v.exit?.cause !== 'guest-poweroff')
  if (died !== undefined) return { message: `VMM ended during the stop: ${died.reason ?? 'no reason given'}`, error: null }
  return { message: 'guest powered off', error: null }
}
