/**
 * The write path's wire types (docs/design.md §8): what an instance's execution sends the record
 * activities (activities/instance-records.ts, vmm-records.ts, vmm-observations.ts) and what they
 * answer. An execution writes only through these: a change keyed by its decision, a placement
 * keyed by its operation, and reads the record back from every answer.
 *
 * Types only; they travel in workflow histories, so a field renamed or removed breaks the replay
 * of recorded executions.
 */
import type { EventKind } from '../domain/event.js'
import type { PlannedVmmSpec } from '../domain/host-agent-api.js'
import type { Instance, InstanceError, InstanceState, IntendedState } from '../domain/instance.js'
import type { MigrationRecordPhase } from '../domain/migration.js'
import type { OperationError, OperationKind, OperationStatus } from '../domain/operation.js'
import type { VmmRecord, VmmReport } from '../domain/vmm.js'

export interface InstanceSnapshot {
  instance: Instance
  /** The instance's VMMs that are not confirmed gone, oldest first. */
  liveVmms: VmmRecord[]
  activeVmm: VmmRecord | null
}

export interface OperationUpdate {
  id: string
  kind: OperationKind
  status: OperationStatus
  error?: OperationError | null
  workflowId: string
  runId: string
}

/** The instance's fields a change may set. */
export interface InstanceFields {
  state?: InstanceState
  intendedState?: IntendedState
  activeVmmId?: string | null
  lastError?: InstanceError | null
  restartAttempts?: number
  restartAt?: string | null
  /** Marks the instance destroyed and releases what its VMMs still hold. */
  destroyed?: boolean
}

/** The event a change appends. */
export interface ChangeEvent {
  kind: EventKind
  message: string
  details?: Record<string, unknown>
  vmmId?: string | null
}

/**
 * A step of a live migration (workflows/migrate.ts). The first one, `reserving`, names the source;
 * the target is named by its placement. The phase only moves forward and, once over, stays.
 */
export interface MigrationUpdate {
  id: string
  phase: MigrationRecordPhase
  reason?: string | null
  /** The first update's: where the VM is, and the host the request named. */
  source?: { vmmId: string, hostId: string, requestedHostId: string | null }
  cancelRequested?: boolean
}

export interface InstanceChange extends ChangeEvent {
  instanceId: string
  /** What the change decides (domain/decisions.ts); a change whose key is recorded was made. */
  decision: string
  set?: InstanceFields
  operation?: OperationUpdate
  migration?: MigrationUpdate
  /** VMM reports received since the execution's last write, applied first. */
  observations?: VmmReport[]
}

export interface ChangeResult {
  snapshot: InstanceSnapshot
  /** The VMM records the observations left, whether or not they were applied. */
  vmms: VmmRecord[]
  /** The decision had been recorded before: nothing was changed this time. */
  madeBefore: boolean
}

/** A live migration as recorded, with both its VMMs' records: what a migrate execution resumes from. */
export interface RecordedMigration {
  id: string
  phase: MigrationRecordPhase
  reason: string | null
  cancelRequested: boolean
  source: VmmRecord
  target: VmmRecord | null
}

export interface PlacementRequest {
  operationId: string
  vcpus: number
  memoryMiB: number
  /** The change that makes the new VMM the instance's active one (its event names VMM and host). */
  change: InstanceChange
  /** A change to record first, in the same transaction (the operation's start). */
  before?: InstanceChange
  /**
   * Set when the VMM is a live migration's target: it is recorded as the migration's target and
   * does not become the instance's active VMM (that happens at the commit point).
   */
  migrationTarget?: MigrationTarget
  /**
   * Asks the new VMM's agent to make it, once the placement is committed, when the instance has
   * no other live VMM to fence first: one try, within a few seconds. Absent in histories recorded
   * before the placement did (patch `place-and-boot`).
   */
  boot?: PlacedBoot
}

/** What the agent needs to make a placed VMM that boots (`EnsureVmmInput` less what placement decides). */
export interface PlacedBoot {
  instanceName: string
  spec: PlannedVmmSpec
  /**
   * The boot's end, decided with it: recorded by the placement when the agent answers that the VM
   * runs (the activity names the VMM and its host in it, and adds the answer as its observation).
   * Absent in histories recorded before the placement did; their results have no `finished`.
   */
  finish?: InstanceChange
}

export interface MigrationTarget {
  migrationId: string
  /** The host the request named; null: any host but the source's. */
  onlyHostId: string | null
  excludeHostId: string
}

export type PlacementResult =
  | {
    placed: true
    vmmId: string
    hostId: string
    snapshot: InstanceSnapshot
    /**
     * The agent's answer to the boot the request asked for; null when it was not asked (a VMM
     * to fence first) or did not answer in time: the workflow then asks it through `ensureVmm`.
     */
    booted?: VmmReport | null
    /** The boot's `finish`, recorded: the agent answered that the VM runs. */
    finished?: ChangeResult
  }
  | { placed: false, code: 'NoCapacity' | 'InstanceDestroyed', reason: string, snapshot: InstanceSnapshot }
