/**
 * Instance events: the user-visible history of an instance. Every state change is one, with
 * a sentence saying why ("stop grace period of 30 s expired; VMM killed").
 */
import type { InstanceState } from './instance.js'

export const EVENT_KINDS = [
  'operation-started',
  'operation-finished',
  'state-changed',
  'vmm-placed',
  'vmm-observed',
  /** A condition began or ended: the host unreachable or back, the VMM unresponsive or back. */
  'condition-changed',
  /** A live migration took a step: its target ready, sending, committed, the source gone. */
  'migration-step'
] as const
export type EventKind = (typeof EVENT_KINDS)[number]

export interface InstanceEvent {
  id: string
  instanceId: string
  at: string
  kind: EventKind
  /** The instance's state after the event. */
  state: InstanceState | null
  operationId: string | null
  vmmId: string | null
  message: string
  details: Record<string, unknown> | null
}
