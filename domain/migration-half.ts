/**
 * What a host agent decides about its VMM's half of a live migration from what Cloud Hypervisor
 * says: the pure half of host-agent/supervisor/vmm-migration.ts, which has the theory of
 * operation and carries these decisions out.
 *
 * - `halfStepOnEvent`: what one of the VMM's events does to the half (the events are
 *   `../shared/reference/cloud-hypervisor-notes.md` §6's). A phase only moves forward and a final
 *   one never changes, so an event applied twice, or late, decides nothing the second time.
 * - `adoptedReceiveStep`: what a restarted agent does with a target whose receive call was lost
 *   with the old agent, from the VM's state once the VMM's API is free.
 */
import { isFinalHalfPhase, type MigrationHalfPhase, type VmmMigration } from './vmm.js'

/** How far along its half each phase is: a half only moves to a later one. */
const PHASE_RANK: Record<MigrationHalfPhase, number> = { preparing: 0, sending: 0, ready: 1, receiving: 2, held: 2, finished: 3, failed: 3 }

/** The target's phase each receive event stands for. */
const RECEIVE_EVENTS: Record<string, MigrationHalfPhase | undefined> = {
  'migration-receive-ready': 'ready',
  'migration-receive-started': 'receiving',
  'migration-receive-finished': 'finished',
  'migration-receive-failed': 'failed'
}

/** An event of the VMM's event file (`--event-monitor`), as far as a half reads it. */
export interface HalfEvent {
  source: string
  event: string
  properties: Record<string, string> | null
}

export type HalfEventStep =
  /** The event changes nothing (not the VM's, no half, a final or held half, or not later). */
  | { step: 'none' }
  /** Target: ready to receive, or receiving. */
  | { step: 'advance', phase: 'ready' | 'receiving' }
  /** Target: the commit point, the VM runs here now. */
  | { step: 'receive-finished' }
  /** Target: the receive failed; a target is single-use and is killed. */
  | { step: 'receive-failed' }
  /** Source: Cloud Hypervisor took the send. */
  | { step: 'send-started' }
  /** Source: the VM paused for the downtime: a failure from now on may have handed the VM over. */
  | { step: 'downtime-began' }
  /** Source: another memory iteration sent (progress). */
  | { step: 'iteration', iterations: number }
  /** Source: the VM migrated; the process exits next. */
  | { step: 'sent' }
  /** Source: the send failed past the downtime: the target may have the VM, so pause it here and hold. */
  | { step: 'hold' }
  /** Source: the send failed before the downtime: the VM runs on here. */
  | { step: 'send-failed' }

/** What `event` does to `half`; `downtimeBegan`: the source's VM was seen paused for the downtime. */
export function halfStepOnEvent (half: VmmMigration | null, downtimeBegan: boolean, event: HalfEvent): HalfEventStep {
  // A held source's migration is over as far as Cloud Hypervisor goes: the control plane decides the rest.
  if (event.source !== 'vm' || half === null || isFinalHalfPhase(half.phase) || half.phase === 'held') return { step: 'none' }
  if (half.role === 'target') {
    const phase = RECEIVE_EVENTS[event.event]
    if (phase === 'finished') return { step: 'receive-finished' }
    if (phase === 'failed') return { step: 'receive-failed' }
    if ((phase === 'ready' || phase === 'receiving') && PHASE_RANK[phase] > PHASE_RANK[half.phase]) return { step: 'advance', phase }
    return { step: 'none' }
  }
  switch (event.event) {
    case 'migration-started': return { step: 'send-started' }
    case 'paused': return { step: 'downtime-began' }
    case 'migration-memory-iteration': {
      const iterations = Number(event.properties?.id) + 1
      return iterations > half.iterations ? { step: 'iteration', iterations } : { step: 'none' }
    }
    case 'migration-finished': return { step: 'sent' }
    case 'migration-failed': return downtimeBegan ? { step: 'hold' } : { step: 'send-failed' }
    default: return { step: 'none' }
  }
}

/**
 * A target adopted with its half in progress, once its API answers `vm.info` (null: no VM):
 * a VM `Running` here is the commit point; no VM and no receive event at all (`preparing`) means
 * the receive was never issued, and it is issued now; anything else failed while no agent watched.
 */
export function adoptedReceiveStep (vmState: string | null, phase: MigrationHalfPhase): 'finish' | 'issue-receive' | 'fail' {
  if (vmState === 'Running') return 'finish'
  if (vmState === null && phase === 'preparing') return 'issue-receive'
  return 'fail'
}
