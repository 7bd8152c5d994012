/**
 * Conditions ride beside an instance's state (docs/design.md §3): what is known to be wrong or going
 * on without being a state of its own. Derived when the instance is read, never stored.
 *
 * Losing contact changes no state (I2): an instance whose host cannot be reached stays `running`
 * (or `stopping`, `starting`) and carries `HostUnreachable{since}` instead — once the host's
 * heartbeats have stopped, or calls to its agent have failed for the unreachable threshold.
 */
import type { HostStatus } from './host.js'
import type { InstanceError, InstanceState } from './instance.js'
import { isTerminalVmmState, type VmmState } from './vmm.js'

export const CONDITION_TYPES = ['HostUnreachable', 'VmmUnresponsive', 'StopForced', 'RestartBackoff', 'NoCapacity'] as const
export type ConditionType = (typeof CONDITION_TYPES)[number]

export interface Condition {
  type: ConditionType
  /** When it began; for `RestartBackoff`, when the restart is due. */
  since: string
  message: string
}

export interface ConditionInputs {
  state: InstanceState
  lastError: InstanceError | null
  restartAt: string | null
  vmm: { state: VmmState, unresponsiveSince: string | null } | null
  host: { id: string, status: HostStatus, statusSince: string, contactFailingSince: string | null } | null
  now: number
  /** How long calls to an agent must have failed before its host shows unreachable. */
  unreachableAfterMs: number
}

/** Since when the host cannot be reached, or null while it can. */
function unreachableSince (host: NonNullable<ConditionInputs['host']>, now: number, unreachableAfterMs: number): string | null {
  if (host.status === 'unreachable') return host.statusSince
  const failing = host.contactFailingSince
  return failing !== null && now - Date.parse(failing) >= unreachableAfterMs ? failing : null
}

export function conditionsOf (inputs: ConditionInputs): Condition[] {
  const { state, lastError, restartAt, vmm, host } = inputs
  const conditions: Condition[] = []
  const live = vmm !== null && !isTerminalVmmState(vmm.state)
  const since = live && host !== null ? unreachableSince(host, inputs.now, inputs.unreachableAfterMs) : null
  if (since !== null) {
    conditions.push({ type: 'HostUnreachable', since, message: `host ${host!.id} has not been reachable since ${since}; the last known state is shown` })
  }
  if (live && vmm.unresponsiveSince !== null) {
    conditions.push({ type: 'VmmUnresponsive', since: vmm.unresponsiveSince, message: "the VMM's API does not answer, but its process lives" })
  }
  if (state === 'stopped' && lastError?.code === 'StopForced') {
    conditions.push({ type: 'StopForced', since: lastError.at, message: lastError.message })
  }
  if (state === 'starting' && lastError?.code === 'NoCapacity') {
    conditions.push({ type: 'NoCapacity', since: lastError.at, message: `waiting for a host with room: ${lastError.message}` })
  }
  if (state === 'failed' && restartAt !== null) {
    conditions.push({ type: 'RestartBackoff', since: restartAt, message: `restarts automatically at ${restartAt} (restart policy on-failure)` })
  }
  return conditions
}
