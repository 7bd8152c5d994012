/**
 * Live migrations as the control plane records them (workflows/migrate.ts tells how one runs).
 *
 * Each side's own state, the VMM's half as its agent reports it, lives with that side's VMM
 * (`VmmMigration`, with the VMM's generation). The migration's record keeps what the control
 * plane decided: its phase, which moves only forward, and when it committed.
 */
import type { VmmMigration, VmmState } from './vmm.js'

/**
 * The phase of the whole migration, as the control plane decided it (`migrations.phase`, the
 * API's `phase`). Not a VMM's half (`MigrationHalfPhase` in domain/vmm.ts, the agent's word),
 * though two names are alike: here `preparing` and `sending` are the control plane's steps.
 * - `reserving`: the target VMM is being placed;
 * - `preparing`: the target is placed and is being made ready to receive;
 * - `sending`: the source sends the VM (precopy);
 * - `committed`: the target has the VM (its receive finished) and is the instance's active VMM;
 *   the source is being confirmed gone;
 * - `succeeded`, `failed` (the VM stays on the source), `cancelled` (likewise, on request or at a
 *   timeout) and `aborted` (a stop or delete preempted it): over.
 */
export const MIGRATION_RECORD_PHASES = ['reserving', 'preparing', 'sending', 'committed', 'succeeded', 'failed', 'cancelled', 'aborted'] as const
export type MigrationRecordPhase = (typeof MIGRATION_RECORD_PHASES)[number]

export function isMigrationOver (phase: MigrationRecordPhase): boolean {
  return phase === 'succeeded' || phase === 'failed' || phase === 'cancelled' || phase === 'aborted'
}

/** One side of a migration: its VMM and host, and that VMM's half as its agent reported it. */
export interface MigrationSide {
  vmmId: string
  hostId: string
  /** The VMM's own state and generation (domain/vmm.ts). */
  state: VmmState
  generation: number
  half: VmmMigration | null
}

export interface Migration {
  id: string
  instanceId: string
  phase: MigrationRecordPhase
  source: MigrationSide
  target: MigrationSide | null
  requestedHostId: string | null
  /** Precopy memory iterations the source has sent. */
  iterations: number
  reason: string | null
  cancelRequestedAt: string | null
  startedAt: string
  committedAt: string | null
  finishedAt: string | null
}

/**
 * When a migration gives up, as KubeVirt does: no progress (a new phase of either side, or a
 * memory iteration) for `progressTimeoutMs`, or more than `completionMsPerGiB` per GiB of the
 * VM's memory in all. `downtimeMs` is the pause Cloud Hypervisor aims for at the end.
 */
export interface MigrationSettings {
  progressTimeoutMs: number
  completionMsPerGiB: number
  downtimeMs: number
}

/** The whole migration's bound for a VM of this much memory (at least one GiB's worth). */
export function completionTimeoutMs (settings: MigrationSettings, memoryMiB: number): number {
  return Math.ceil(Math.max(1, memoryMiB / 1024) * settings.completionMsPerGiB)
}
