/**
 * How a VMM's end is reported: which terminal state, which cause, and a sentence for people.
 *
 * The agent's own intent wins when it had one, because it was recorded before the kill: a
 * destroy request is `killed`, a stop whose deadline passed is `stop-deadline`, a boot that
 * failed is `boot-failed`. Otherwise the exit speaks: 0 is the guest powering off (Cloud
 * Hypervisor exits 0 when the guest does), anything else is a crash. A process that died while
 * no agent watched has no exit status; if its event file ends with `vmm shutdown` it went down
 * cleanly, otherwise it `vanished`.
 */
import { describeExit, type VmmExit } from '../../domain/vmm.js'
import type { ExitObservation } from '../process/vmm-process.js'
import type { PendingKill } from '../store/record.js'

export interface ExitContext {
  destroyRequested: boolean
  pendingKill: PendingKill | null
}

export interface ExitOutcome {
  state: 'destroyed' | 'failed'
  exit: VmmExit
  reason: string
}

export function classifyExit (
  context: ExitContext,
  observed: ExitObservation,
  eventsEndWithVmmShutdown: boolean
): ExitOutcome {
  const status = observed.known
    ? { code: observed.code, signal: observed.signal }
    : eventsEndWithVmmShutdown ? { code: 0, signal: null } : { code: null, signal: null }

  if (context.destroyRequested) {
    return { state: 'destroyed', exit: { cause: 'killed', ...status }, reason: 'VMM killed on request' }
  }
  const exitedCleanly = status.code === 0
  if (context.pendingKill !== null && !exitedCleanly) {
    const { cause, reason } = context.pendingKill
    return { state: cause === 'stop-deadline' ? 'destroyed' : 'failed', exit: { cause, ...status }, reason }
  }
  if (exitedCleanly) {
    return { state: 'destroyed', exit: { cause: 'guest-poweroff', ...status }, reason: 'guest powered off' }
  }
  if (!observed.known) {
    return {
      state: 'failed',
      exit: { cause: 'vanished', ...status },
      reason: 'VMM process vanished while the agent was not running; how it ended is unknown'
    }
  }
  const exit: VmmExit = { cause: 'crashed', ...status }
  return { state: 'failed', exit, reason: `VMM ${describeExit(exit)}` }
}
