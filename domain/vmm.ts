/**
 * VMMs: one Cloud Hypervisor process running one VM of an instance on one host.
 *
 * A VMM is never reused: every start of an instance makes a new VMM with a new ID, chosen by
 * the workflow and recorded before the host agent is asked to create it (I3). The host agent
 * owns the truth about its VMMs and reports every change with a per-VMM generation; the
 * control plane applies a report only if its generation is newer than the last one applied.
 */

export const VMM_STATES = [
  'starting',
  'running',
  'rebooting',
  'stopping',
  'destroyed',
  'failed',
  'lost'
] as const
export type VmmState = (typeof VMM_STATES)[number]

/**
 * Terminal states: the VMM process is confirmed gone (`destroyed`, `failed`) or its host has been
 * fenced by an operator (`lost`). Only then may another VMM of the same instance start (I6).
 */
export function isTerminalVmmState (state: VmmState): boolean {
  return state === 'destroyed' || state === 'failed' || state === 'lost'
}

/** Why a VMM process ended, as the host agent observed it. */
export const VMM_EXIT_CAUSES = [
  /** The guest powered itself off: the VMM process exited 0 on its own. */
  'guest-poweroff',
  /** The control plane asked for the VMM to be destroyed, and the agent killed it. */
  'killed',
  /** A stop's grace period ran out, and the agent killed the VMM at the deadline. */
  'stop-deadline',
  /** The process exited with a non-zero code or was killed by a signal nobody sent. */
  'crashed',
  /** The VM could not be created or booted. */
  'boot-failed',
  /** The process is gone and how it ended is not known (it died while the agent was down). */
  'vanished',
  /** The host's lease lapsed and no majority of its peers vouched for an outage: the agent killed the VMM (docs/design.md §17). */
  'fenced',
  /**
   * The VM left by live migration: the process exited 0 after `migration-finished`, having
   * handed the VM over to the migration's target.
   */
  'migrated'
] as const
export type VmmExitCause = (typeof VMM_EXIT_CAUSES)[number]

export interface VmmExit {
  cause: VmmExitCause
  code: number | null
  signal: string | null
}

/** Which half of a live migration a VMM is. */
export type MigrationRole = 'source' | 'target'

/**
 * How far a VMM's half of a live migration has got, as its agent saw it in the VMM's events
 * (`../shared/reference/cloud-hypervisor-notes.md` §6); the whole migration's phase, the
 * control plane's, is `MigrationRecordPhase` (domain/migration.ts):
 * - target: `preparing` (recorded, the empty VMM starting), `ready` (`migration-receive-ready`:
 *   it listens at `receiverUrl`), `receiving` (`migration-receive-started`), `finished`
 *   (`migration-receive-finished` or the 204 of `vm.receive-migration`: the commit point, the VM
 *   runs here now) or `failed` (the receive failed or was cancelled; the VMM is killed, as a
 *   target VMM is single-use);
 * - source: `sending` (`vm.send-migration` recorded, then issued), `finished` (`migration-finished`:
 *   the process exits 0 next), `failed` (`migration-failed` before the downtime began, or the send
 *   was refused: the VM runs on here) or `held` (`migration-failed` once the downtime had begun:
 *   the target may run the VM, so the agent has paused it here; the control plane says which
 *   side has it, and the source is resumed, `failed`, or killed).
 */
export const MIGRATION_HALF_PHASES = ['preparing', 'ready', 'receiving', 'sending', 'finished', 'failed', 'held'] as const
export type MigrationHalfPhase = (typeof MIGRATION_HALF_PHASES)[number]

/** A half that has finished or failed moves no more (a `held` source still waits for the control plane). */
export function isFinalHalfPhase (phase: MigrationHalfPhase): boolean {
  return phase === 'finished' || phase === 'failed'
}

/** A VMM's half of a live migration, owned and reported by that VMM's agent. */
export interface VmmMigration {
  /** The migration's ID: the ID of the migrate operation. */
  id: string
  role: MigrationRole
  phase: MigrationHalfPhase
  /** Target: where the VMM listens for the source, chosen and recorded before it listens. */
  receiverUrl: string | null
  /** Source: precopy memory iterations sent so far (`migration-memory-iteration`). */
  iterations: number
  /** When the phase or the iterations last moved: what a progress timeout measures. */
  progressAt: string
  /** Why the half failed, for people. */
  reason: string | null
}

/** A VMM as the host agent reports it. */
export interface VmmReport {
  vmmId: string
  instanceId: string
  hostId: string
  state: VmmState
  /** Bumped by the agent on every observed change; stale reports are ignored. */
  generation: number
  observedAt: string
  /** A sentence for people: what happened. */
  reason: string | null
  exit: VmmExit | null
  /** Set while the VMM's API does not answer though its process lives: a condition, not death. */
  unresponsiveSince: string | null
  /** The VMM's half of a live migration, if it has one (absent from agents older than migration). */
  migration?: VmmMigration | null
  /**
   * Set on a report the control plane concludes itself (`concludedReport`), never by an agent:
   * it outranks the agent's generations (`withReport`).
   */
  concluded?: true
}

/** Describes an exit for events and errors, e.g. "exited with code 3" or "killed by SIGSEGV". */
export function describeExit (exit: VmmExit): string {
  if (exit.signal !== null) return `killed by ${exit.signal}`
  if (exit.code !== null) return `exited with code ${exit.code}`
  return 'exit status unknown'
}

/** A VMM as the control plane records it. */
export interface VmmRecord {
  id: string
  instanceId: string
  hostId: string
  state: VmmState
  /** The generation of the last report applied. */
  generation: number
  reason: string | null
  exit: VmmExit | null
  unresponsiveSince: string | null
  /** When the VMM first reported running. */
  runningSince: string | null
  /** The VMM's half of a live migration, as its agent last reported it. */
  migration: VmmMigration | null
  createdAt: string
  updatedAt: string
  destroyedAt: string | null
}

/**
 * A report the control plane makes itself about a VMM it has a positive answer for without a
 * report from the agent: the agent affirmed it has no such VMM (`destroyed`), or the VMM's host
 * was declared lost (`lost`). One generation past the record it was made from, and `concluded`.
 */
export function concludedReport (vmm: VmmRecord, state: 'destroyed' | 'lost', reason: string, observedAt: string): VmmReport {
  return {
    vmmId: vmm.id,
    instanceId: vmm.instanceId,
    hostId: vmm.hostId,
    state,
    generation: vmm.generation + 1,
    observedAt,
    reason,
    exit: null,
    unresponsiveSince: null,
    concluded: true
  }
}

/**
 * Whether a report is too old to take in: the record is terminal already (a VMM confirmed gone
 * stays gone), or the report's generation is not newer than the record's. A conclusion of the
 * control plane's is never too old for a live VMM: it is made from PostgreSQL's record, and an
 * execution may hold newer answers of the agent that PostgreSQL has not yet recorded (a boot's
 * first answer, say), so its generation says nothing about its order. It comes after everything
 * the agent said: a host declared lost is fenced, whatever its agent last answered.
 */
export function isStaleReport (known: Pick<VmmRecord, 'state' | 'generation'>, report: VmmReport): boolean {
  if (isTerminalVmmState(known.state)) return true
  return report.generation <= known.generation && report.concluded !== true
}

/**
 * A VMM's record once a report is taken in, or null when the report is stale (`isStaleReport`).
 * PostgreSQL applies the same rule (activities/vmm-observations.ts), so an execution's memory and the
 * record never disagree.
 */
export function withReport (known: VmmRecord, report: VmmReport): VmmRecord | null {
  if (isStaleReport(known, report)) return null
  const terminal = isTerminalVmmState(report.state)
  return {
    ...known,
    state: report.state,
    generation: Math.max(known.generation, report.generation),
    reason: report.reason,
    exit: report.exit,
    unresponsiveSince: report.unresponsiveSince,
    migration: report.migration === undefined ? known.migration : report.migration,
    runningSince: report.state === 'running' ? known.runningSince ?? report.observedAt : known.runningSince,
    updatedAt: report.observedAt,
    destroyedAt: terminal ? known.destroyedAt ?? report.observedAt : null
  }
}
