/**
 * The activities' contract: every activity vmplane's workflows call, with its input and output
 * types. The workflows proxy `Activities` (workflows/activity-proxies.ts) and never import an
 * implementation; activities/index.ts builds an object of this type for the worker, so the
 * compiler holds each implementation to its signature here. Grouped by what the activities touch:
 * an instance's record (the write path's types are in records.ts), hosts, the host agents, a
 * host's fencing, drains, the reconciler.
 *
 * Types only; inputs and outputs travel in workflow histories, so a field renamed or removed
 * breaks the replay of recorded executions.
 */
import type { HostAnnouncement, HostStatus } from '../domain/host.js'
import type { IncomingMigration, PlannedVmmSpec } from '../domain/host-agent-api.js'
import type { LeaseSettings } from '../domain/host-lease.js'
import type { InstanceState, IntendedState } from '../domain/instance.js'
import type { RestartBackoff } from '../domain/instance-rules.js'
import type { MigrationSettings } from '../domain/migration.js'
import type { MigrateRequest, NewInstance } from '../domain/requests.js'
import type { VmmRecord, VmmReport } from '../domain/vmm.js'
import type { ChangeResult, InstanceChange, InstanceSnapshot, PlacementRequest, PlacementResult, RecordedMigration } from './records.js'

/** Durations the workflows need; from the worker's configuration, recorded in history. */
export interface OperationSettings extends RestartBackoff {
  bootTimeoutMs: number
  placementTimeoutMs: number
  killBackstopMs: number
  hostUnreachableAfterMs: number
  /** How old an orphan VMM or a stray process must be before the reconciler reaps it. */
  orphanGraceMs: number
  /** Absent in histories recorded before live migration existed, whose executions never migrate. */
  migration: MigrationSettings
  /** When a halt continues as new (workflows/execution.ts); absent in histories recorded before it did. */
  history?: HistoryLimits
  /** Hosts' leases (docs/design.md §17); absent in histories recorded before hosts held leases. */
  lease?: LeaseSettings
}

export interface HistoryLimits {
  continueAsNewAfterEvents: number
  minGrowthEvents: number
}

/** An instance's record and its VMMs' (activities/instance-records.ts, vmm-records.ts, vmm-observations.ts). */
export interface InstanceRecordActivities {
  operationSettings: () => Promise<OperationSettings>
  /** What an instance's execution begins with: the settings, and the instance (created if asked). */
  openExecution: (instanceId: string, create?: NewInstance) => Promise<{ settings: OperationSettings, snapshot: InstanceSnapshot | null }>
  /** A live migration as recorded, for a migrate execution to resume from (workflows/migrate.ts). */
  readMigration: (migrationId: string) => Promise<RecordedMigration | null>
  recordInstanceChange: (change: InstanceChange) => Promise<ChangeResult>
  placeVmm: (request: PlacementRequest) => Promise<PlacementResult>
  recordVmmObservations: (instanceId: string, reports: VmmReport[]) => Promise<VmmRecord[]>
}

/** A host's record, as its monitor keeps it (activities/host-records.ts). */
export interface HostRecordActivities {
  recordHostHeartbeat: (announcement: HostAnnouncement) => Promise<HostStatus>
  markHostUnreachable: (hostId: string, lastHeardAt: string | null) => Promise<void>
}

/** Whether a host was declared lost by its lease, and if not, in how long to judge again (null: not until it is heard again). */
export interface LeaseJudgement {
  lost: boolean
  judgeAgainInMs: number | null
}

/** A host's lease, as its monitor judges it (activities/host-leases.ts, docs/design.md §17). */
export interface HostLeaseActivities {
  /** Declares the host lost if its lease's bound has passed while a majority of its peers held theirs. */
  judgeHostLease: (hostId: string) => Promise<LeaseJudgement>
}

export interface VmmTarget {
  hostId: string
  vmmId: string
}

export interface EnsureVmmInput extends VmmTarget {
  instanceId: string
  instanceName: string
  spec: PlannedVmmSpec
  /** Makes the VMM a live migration's target: it receives its VM instead of booting one. */
  incoming?: IncomingMigration
}

export interface SendMigrationInput extends VmmTarget {
  migrationId: string
  /** The target's `receiverUrl`, from its report. */
  destinationUrl: string
  downtimeMs: number
  timeoutS: number
}

/** A call about one half of a migration: the agent refuses it for another migration. */
export interface MigrationHalfInput extends VmmTarget {
  migrationId: string
}

export interface PowerButtonInput extends VmmTarget {
  /**
   * ISO time, by the control plane's clock, at which the VMM is killed if the guest has not
   * powered off. The agent is told the time left until then (`killAfterMs`), not the time itself.
   */
  deadline: string
}

/**
 * Calls to a VMM's host agent (activities/host-agent-calls.ts). Each answers with what the agent
 * said as a `VmmReport`, which the workflow takes in exactly like a report the agent sent.
 */
export interface HostAgentActivities {
  ensureVmm: (input: EnsureVmmInput) => Promise<VmmReport>
  /** Has the source VMM send its VM to the target; the report's `migration` says how far it got. */
  sendMigration: (input: SendMigrationInput) => Promise<VmmReport>
  /** Kills the migration's target unless it has finished receiving. */
  cancelIncomingMigration: (input: MigrationHalfInput) => Promise<VmmReport>
  /** Has a migration's source, held paused by its agent, resume the VM: the target does not have it. */
  resumeHeldSource: (input: MigrationHalfInput) => Promise<VmmReport>
  /** Presses the power button and has the agent kill the VMM at the deadline. */
  pressPowerButton: (input: PowerButtonInput) => Promise<VmmReport>
  rebootVmm: (input: VmmTarget) => Promise<VmmReport>
  /** What the agent knows of the VMM now; `null` when it has no record of it. */
  describeVmm: (input: VmmTarget) => Promise<VmmReport | null>
  /** Removes a destroyed instance's disks and seed from the storage every host mounts. */
  releaseInstanceStorage: (input: { instanceId: string }) => Promise<'released' | 'nothing-made' | 'deferred'>
  /** Kills and cleans up the VMM; `null` when the agent has no record of it (it is gone). */
  destroyVmm: (input: VmmTarget) => Promise<VmmReport | null>
}

/** A host an operator declared lost, and its return (activities/host-fencing.ts, I6). */
export interface HostFencingActivities {
  /** Marks the host and its live VMMs lost and tells their instances but `byInstanceId`'s; the VMMs its loss fenced. */
  declareHostLost: (hostId: string, byInstanceId: string | null) => Promise<VmmRecord[]>
  /** Destroys, through the returned agent, every lost VMM of the host not yet fenced; how many. */
  fenceLostVmms: (hostId: string) => Promise<number>
  /** Brings a lost host back to `active`, but only once none of its lost VMMs is unfenced. */
  readmitHost: (hostId: string) => Promise<boolean>
  /** The same, for a host its lease declared lost (an operator's declaration waits for an operator). */
  readmitHostLostByLease: (hostId: string) => Promise<boolean>
}

export interface InstanceOnHost {
  id: string
  name: string
  state: InstanceState
  /** Its active VMM is not on the host: what lives there is a migration's other half. */
  activeElsewhere: boolean
}

export interface DrainProgress {
  drainId: string
  status: 'draining' | 'drained' | 'stopped' | 'failed'
  total: number
  migrated: number
  failed: number
  lastError: string | null
}

/** What a host's drain reads and writes (activities/drains.ts). */
export interface DrainActivities {
  /** Instances with a live VMM on the host: the drain's host is empty only when this is. */
  instancesOnHost: (hostId: string) => Promise<InstanceOnHost[]>
  /** Starts the migrate operation unless it exists; `busy` while another operation holds the instance. */
  requestMigration: (request: MigrateRequest, instance: { name: string, state: InstanceState }) => Promise<'started' | 'busy'>
  /** The outcome of each operation that has ended, by ID. */
  operationOutcomes: (operationIds: string[]) => Promise<Record<string, { status: string, error: string | null }>>
  recordDrainProgress: (hostId: string, progress: DrainProgress) => Promise<void>
}

/** Counts of what a pass found and did, by kind. */
export type ReconcileCounts = Record<string, number>

export interface HostReconciliation {
  hostId: string
  reachable: boolean
  counts: ReconcileCounts
  actions: string[]
}

export interface DriftedInstance {
  id: string
  name: string
  state: InstanceState
  intendedState: IntendedState
  stopGraceSeconds: number
}

export interface ReconcilePass {
  id: string
  startedAt: string
  counts: ReconcileCounts
  actions: string[]
}

/** The reconciler's work, one pass of the `reconcile` workflow (activities/reconciler.ts). */
export interface ReconcilerActivities {
  reconcilableHosts: () => Promise<string[]>
  reconcileHost: (hostId: string) => Promise<HostReconciliation>
  /** The storage every host mounts, read through `hostId`'s agent. */
  reconcileStorage: (hostId: string) => Promise<HostReconciliation>
  releaseLeakedAddresses: () => Promise<number>
  driftedInstances: () => Promise<DriftedInstance[]>
  /** Re-drives one instance's intent unless a workflow runs for it; what was done, or null. */
  redriveInstance: (instance: DriftedInstance, operationId: string) => Promise<string | null>
  closeAbandonedOperations: () => Promise<string[]>
  retellHostLosses: () => Promise<string[]>
  releaseLeakedReservations: () => Promise<number>
  purgeIdempotencyKeys: () => Promise<number>
  recordReconcilePass: (pass: ReconcilePass) => Promise<void>
}

/** Telling hosts of the firewall rules (activities/firewall-policies.ts). */
export interface FirewallActivities {
  /** Sends each live VMM of the instances its current policy; how many VMMs it reached. */
  pushFirewallPolicies: (instanceIds: string[]) => Promise<number>
}

/** Every activity the worker registers. */
export type Activities =
  FirewallActivities &
  InstanceRecordActivities &
  HostRecordActivities &
  HostLeaseActivities &
  HostAgentActivities &
  HostFencingActivities &
  DrainActivities &
  ReconcilerActivities
