/**
 * Conditions ride beside an instance's state (DESIGN.md §3): what is known to be wrong or going
 * on without being a state of its own. Derived when the instance is read, never stored.
 *
 * Losing contact changes no state (I2): an instance whose host is unreachable stays `running`
 * (or `stopping`) and carries `HostUnreachable{since}` instead.
 */
import type { HostStatus } from './host.js'
import type { InstanceError, InstanceState } from './instance.js'
import { isTerminalVmmState, type VmmState } from './vmm.js'

export const CONDITION_TYPES = ['HostUnreachable', 'VmmUnresponsive', 'StopForced'] as const
export type ConditionType = (typeof CONDITION_TYPES)[number]

export interface Condition {
  type: ConditionType
  since: string
  message: string
}

export interface ConditionInputs {
  state: InstanceState
  lastError: InstanceError | null
  vmm: { state: VmmState, unresponsiveSince: string | null } | null
  host: { id: string, status: HostStatus, statusSince: string } | null
}

export function conditionsOf ({ state, lastError, vmm, host }: ConditionInputs): Condition[] {
  const conditions: Condition[] = []
  const live = vmm !== null && !isTerminalVmmState(vmm.state)
  if (live && host?.status === 'unreachable') {
    conditions.push({ type: 'HostUnreachable', since: host.statusSince, message: `host ${host.id} has not been heard from since ${host.statusSince}; the last known state is shown` })
  }
  if (live && vmm.unresponsiveSince !== null) {
    conditions.push({ type: 'VmmUnresponsive', since: vmm.unresponsiveSince, message: "the VMM's API does not answer, but its process lives" })
  }
  if (state === 'stopped' && lastError?.code === 'StopForced') {
    conditions.push({ type: 'StopForced', since: lastError.at, message: lastError.message })
  }
  return conditions
}
