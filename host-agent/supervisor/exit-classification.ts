/**
 * How a VMM's end is reported: which terminal state, which cause, and a sentence for people.
 *
 * A source that sent its VM away exits 0 right after `migration-finished`: that is `migrated`,
 * whatever else was asked meanwhile, since the VM lives on at the target. Otherwise the agent's
 * own intent wins when it had one, because it was recorded before the kill: a destroy request is
 * `killed`, a stop whose deadline passed is `stop-deadline`, a boot that failed is `boot-failed`,
 * and so is a migration's target that failed to receive (its VM never ran here); a target whose
 * migration was cancelled is `killed`, as it was asked for; a VMM killed because its host's lease
 * lapsed is `fenced`, and so is one killed while the host's watchdog fired. Otherwise the exit speaks: 0 is the
 * guest powering off (Cloud Hypervisor exits 0 when the guest does), anything else is a crash. A
 * process that died while no agent watched has no exit status; if its event file ends with
 * `vmm shutdown` it went down cleanly, otherwise it `vanished`.
 */
import { describeExit, type VmmExit, type VmmExitCause, type VmmMigration } from '../../domain/vmm.js'
import type { ExitObservation } from '../process/vmm-process.js'
import type { PendingKill } from '../store/record.js'

export interface ExitContext {
  destroyRequested: boolean
  pendingKill: PendingKill | null
  migration: Pick<VmmMigration, 'role' | 'phase'> | null
  /** The host's watchdog fired since the VMM was created (host-agent/store/watchdog-mark.ts). */
  fencedByWatchdog?: boolean
}

export interface ExitOutcome {
  state: 'destroyed' | 'failed'
  exit: VmmExit
  reason: string
}

/** The end each kill the agent decides on stands for. */
const KILL_OUTCOMES: Record<PendingKill['cause'], { state: ExitOutcome['state'], cause: VmmExitCause }> = {
  'stop-deadline': { state: 'destroyed', cause: 'stop-deadline' },
  'boot-failed': { state: 'failed', cause: 'boot-failed' },
  'migration-failed': { state: 'failed', cause: 'boot-failed' },
  'migration-cancelled': { state: 'destroyed', cause: 'killed' },
  fenced: { state: 'failed', cause: 'fenced' }
}

export function classifyExit (
  context: ExitContext,
  observed: ExitObservation,
  eventsEndWithVmmShutdown: boolean
): ExitOutcome {
  const status = observed.known
    ? { code: observed.code, signal: observed.signal }
    : eventsEndWithVmmShutdown ? { code: 0, signal: null } : { code: null, signal: null }
  const exitedCleanly = status.code === 0

  if (exitedCleanly && context.migration?.role === 'source' && context.migration.phase === 'finished') {
    return { state: 'destroyed', exit: { cause: 'migrated', ...status }, reason: 'the VM left by live migration; the VMM exited' }
  }
  if (context.destroyRequested) {
    return { state: 'destroyed', exit: { cause: 'killed', ...status }, reason: 'VMM killed on request' }
  }
  if (context.pendingKill !== null && !exitedCleanly) {
    const { state, cause } = KILL_OUTCOMES[context.pendingKill.cause]
    return { state, exit: { cause, ...status }, reason: context.pendingKill.reason }
  }
  if (exitedCleanly) {
    return { state: 'destroyed', exit: { cause: 'guest-poweroff', ...status }, reason: 'guest powered off' }
  }
  if (context.fencedByWatchdog === true && (status.signal === 'SIGKILL' || !observed.known)) {
    return { state: 'failed', exit: { cause: 'fenced', ...status }, reason: "the host's watchdog fenced the host: its agent stopped petting it (its lease lapsed with no majority of peers vouching, or the agent froze or crashed)" }
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
