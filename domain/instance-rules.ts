/**
 * The rules that turn what a VMM did into what its instance is, and what users may ask for in
 * each state. Pure functions: the workflows and the API both decide from here.
 */
import type { Instance, InstanceError, InstanceState, IntendedState } from './instance.js'
import type { OperationKind } from './operation.js'
import { describeExit, type VmmRecord } from './vmm.js'

export interface InstanceOutcome {
  state: 'stopped' | 'failed'
  /** Set when the user's intent must follow: a guest that powered itself off stays off. */
  intendedState?: IntendedState
  error: Omit<InstanceError, 'at'> | null
  message: string
}

/**
 * What an instance becomes when its active VMM ended outside any stop. Only positive signals
 * reach here (I2): the process exited, the agent affirmed it has no such VMM, or an operator
 * declared the host lost. A guest that powered itself off ends `stopped` and stays stopped.
 */
export function outcomeOfVmmEnd (vmm: Pick<VmmRecord, 'state' | 'exit' | 'reason' | 'hostId'>): InstanceOutcome {
  if (vmm.state === 'lost') {
    return {
      state: 'failed',
      error: { code: 'HostLost', message: `host ${vmm.hostId}: ${vmm.reason ?? 'declared lost'}` },
      message: `host ${vmm.hostId} declared lost; VMM fenced`
    }
  }
  const exit = vmm.exit
  if (exit === null) {
    return {
      state: 'failed',
      error: { code: 'VmmGone', message: `the host agent has no VMM for this instance (${vmm.reason ?? 'no reason given'})` },
      message: 'VMM gone'
    }
  }
  switch (exit.cause) {
    case 'guest-poweroff':
      return { state: 'stopped', intendedState: 'stopped', error: null, message: 'guest powered off' }
    case 'killed':
    case 'stop-deadline':
      return { state: 'stopped', intendedState: 'stopped', error: null, message: vmm.reason ?? 'VMM killed' }
    case 'boot-failed':
      return { state: 'failed', error: { code: 'BootFailed', message: vmm.reason ?? 'the VM could not boot' }, message: 'VM failed to boot' }
    case 'vanished':
      return {
        state: 'failed',
        error: { code: 'VmmVanished', message: 'the VMM process disappeared while its host agent was down; exit status unknown' },
        message: 'VMM vanished'
      }
    case 'fenced':
      // The host's own word that it fenced: the same failure as its loss declared, from the host.
      return {
        state: 'failed',
        error: { code: 'HostLost', message: `host ${vmm.hostId} fenced itself, its lease lapsed: ${vmm.reason ?? 'VMM killed'}` },
        message: `host ${vmm.hostId} fenced itself; VMM killed`
      }
    case 'migrated':
      // The instance's record still names this VMM, so the migration's commit was not recorded:
      // its target was killed (cancelled or stopped) as the VM arrived there.
      return {
        state: 'failed',
        error: { code: 'MigrationLost', message: 'the VM left this VMM by live migration, and the migration\'s target was killed as it took over' },
        message: 'VM migrated away without a target to run it'
      }
    case 'crashed':
      return {
        state: 'failed',
        error: { code: 'VmmCrashed', message: `VMM ${describeExit(exit)}` },
        message: `VMM ${describeExit(exit)}`
      }
  }
}

export interface RestartBackoff {
  /** The first delay; it doubles with each restart in a row. */
  restartBackoffMs: number
  restartBackoffMaxMs: number
  /** A VMM that ran this long before failing starts the count over. */
  restartResetMs: number
}

/**
 * When a failed instance restarts by itself, if it does: only with restart policy `on-failure`,
 * while the user still wants it running. The delay doubles with each restart in a row, up to the
 * maximum; a VMM that ran long enough starts the count over; a failure that is not the guest's
 * fault (its host was declared lost, or fenced itself: `HostLost`) does not count. An instance whose policy on
 * host failure is `restart` restarts at once after such a failure, whatever its restart policy:
 * the host is known fenced, so nothing is gained by waiting. A guest that powered itself off is
 * `stopped`, not failed, and never restarts.
 */
export function planRestart (
  instance: Pick<Instance, 'restartPolicy' | 'onHostFailure' | 'intendedState' | 'restartAttempts'>,
  vmm: Pick<VmmRecord, 'runningSince'>,
  outcome: InstanceOutcome,
  backoff: RestartBackoff,
  now: number
): RestartPlan | null {
  if (outcome.state !== 'failed' || instance.intendedState !== 'running') return null
  const hostFailure = HOST_FAILURES.includes(outcome.error?.code ?? '')
  if (hostFailure && instance.onHostFailure === 'restart') return { at: now, attempts: instance.restartAttempts, policy: 'on host failure: restart' }
  if (instance.restartPolicy !== 'on-failure') return null
  const ranLongEnough = vmm.runningSince !== null && now - Date.parse(vmm.runningSince) >= backoff.restartResetMs
  const attempts = ranLongEnough ? 0 : instance.restartAttempts
  const delay = Math.min(backoff.restartBackoffMs * 2 ** attempts, backoff.restartBackoffMaxMs)
  return { at: now + delay, attempts: hostFailure ? attempts : attempts + 1, policy: 'restart policy on-failure' }
}

/** When a failed instance restarts, its restart count then, and the policy that asked for it (for people). */
export interface RestartPlan {
  at: number
  attempts: number
  policy: 'restart policy on-failure' | 'on host failure: restart'
}

/** The failures that are the host's, not the guest's: its loss declared, or its own fence. */
const HOST_FAILURES: readonly string[] = ['HostLost']

/**
 * What happens to a request, given the instance's state and the operation in flight (if any), so
 * the API can answer at once: `run` the operation, answer `noop` (already there), or `conflict`
 * (cannot apply). A stop or delete preempts whatever is in flight; other requests conflict with it.
 */
export type RequestVerdict = { verdict: 'run' } | { verdict: 'noop', reason: string } | { verdict: 'conflict', reason: string }

export function verdictFor (kind: Exclude<OperationKind, 'create'>, state: InstanceState, inFlight: OperationKind | null): RequestVerdict {
  if (state === 'destroyed') {
    return kind === 'delete'
      ? { verdict: 'noop', reason: 'instance is already destroyed' }
      : { verdict: 'conflict', reason: `cannot ${kind} a destroyed instance` }
  }
  if (kind === 'stop' || kind === 'delete') {
    return kind === 'stop' && state === 'stopped' && inFlight === null
      ? { verdict: 'noop', reason: 'instance is already stopped' }
      : { verdict: 'run' }
  }
  if (inFlight !== null) return { verdict: 'conflict', reason: `cannot ${kind} while a ${inFlight} is in flight` }
  if (kind === 'start') {
    if (state === 'running') return { verdict: 'noop', reason: 'instance is already running' }
    return state === 'stopped' || state === 'failed'
      ? { verdict: 'run' }
      : { verdict: 'conflict', reason: `cannot start an instance that is ${state}` }
  }
  // Reboot and migrate: a running VM.
  return state === 'running'
    ? { verdict: 'run' }
    : { verdict: 'conflict', reason: `cannot ${kind} an instance that is ${state}` }
}

/**
 * The operation that brings an instance to what the user intends, for the reconciler to start
 * when nothing is in flight (re-driving intent): an instance stuck in a transitional state after a
 * crash, or one whose intent its state does not meet. `failed` is left alone: whether a failed
 * instance comes back is its restart policy's call. A migration left without its execution is
 * carried on (`migrate`: the same operation, resumed from its record), never replaced by a start,
 * whose fencing would kill the VM it has.
 */
export function convergenceFor (state: InstanceState, intended: IntendedState): 'start' | 'stop' | 'delete' | 'migrate' | null {
  if (state === 'destroyed' || state === 'failed') return intended === 'destroyed' && state === 'failed' ? 'delete' : null
  if (intended === 'destroyed') return 'delete'
  if (intended === 'stopped') return state === 'stopped' ? null : 'stop'
  if (state === 'migrating') return 'migrate'
  return state === 'running' ? null : 'start'
}
