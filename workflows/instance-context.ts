/**
 * What an operation (create.ts, start.ts, reboot.ts, migrate.ts, halt.ts, and the helpers they
 * share) may do to its instance: read the record and the VMMs as the execution knows them, record
 * a change or a placement through the execution's write path, wait for reports, say what it is
 * doing. execution.ts implements it (`InstanceExecution`, which has the theory of operation); the
 * operations import only this, so none depends on the execution's other workings, nor on the other
 * operations it runs.
 */
import type { InstanceFields, MigrationTarget, MigrationUpdate, ChangeEvent, PlacedBoot } from '../contract/records.js'
import type { OperationSettings } from '../contract/activities.js'
import type { Instance, InstanceError } from '../domain/instance.js'
import type { OperationError, OperationStatus } from '../domain/operation.js'
import type { OperationRequest } from '../domain/requests.js'
import type { VmmRecord, VmmReport } from '../domain/vmm.js'
import type { HaltBook } from './halts.js'

/** A change as operations describe it; the execution adds the instance, times and reports. */
export interface ChangeInput extends ChangeEvent {
  /** What the change decides (domain/decisions.ts). */
  decision: string
  set?: Omit<InstanceFields, 'lastError'> & { lastError?: Omit<InstanceError, 'at'> | null }
  operation?: { request: OperationRequest, status: OperationStatus, error?: OperationError | null }
  migration?: MigrationUpdate
}

/**
 * Where a placement put the new VMM (with its agent's answer when the placement asked it to make
 * the VMM and it did: `PlacementRequest.boot`; `finished` when it recorded the boot's `finish`
 * too), or why it could not.
 */
export type Placement = { vmmId: string, hostId: string, booted: VmmReport | null, finished: boolean } | { code: 'NoCapacity' | 'InstanceDestroyed', reason: string }

/** What a placement records with the new VMM, besides the VMM itself. */
export interface PlacementOptions {
  /** A change recorded first, in the same transaction (the operation's start). */
  before?: ChangeInput
  /** Places a live migration's target, which does not become the active VMM. */
  migrationTarget?: MigrationTarget
  /** Has the agent make the VMM as soon as it is placed, when there is nothing to fence first. */
  boot?: Omit<PlacedBoot, 'finish'>
  /** With `boot`: the change the placement records when the agent answers that the VM runs. */
  finish?: ChangeInput
}

export interface InstanceContext {
  /** The worker's settings, as the execution opened with them (recorded in its history). */
  readonly settings: OperationSettings
  /** The instance as last recorded. */
  readonly instance: Instance
  /** Stops and deletes received and not yet carried out; one halt serves them all. */
  readonly halts: HaltBook

  activeVmm: () => VmmRecord | null
  vmm: (vmmId: string) => VmmRecord | null
  /** The instance's VMMs that are not confirmed gone. */
  liveVmms: () => VmmRecord[]
  isGone: (vmmId: string) => boolean
  isRunning: (vmmId: string) => boolean
  /** Who asked to cancel the migration, if anyone has. */
  cancelOf: (migrationId: string) => string | null

  /** Takes in a VMM's record read from PostgreSQL (one the snapshot leaves out, gone, say). */
  remember: (vmm: VmmRecord) => void
  /** Takes in an agent's answer exactly like a report it sent. */
  observe: (report: VmmReport | null) => void
  /** What the operation is doing, for the `state` query and the Temporal UI. */
  enterPhase: (phase: string, detail?: string) => void

  /** Records one change of the instance and its event, after every write decided before it. */
  change: (input: ChangeInput) => Promise<void>
  /**
   * Places the operation's new VMM and makes it the active one, in one write; `before` is
   * recorded in the same transaction. A live migration's target does not become active.
   */
  placeVmm: (request: OperationRequest, options?: PlacementOptions) => Promise<Placement>
  /**
   * Waits until `test` holds, at most `timeoutMs` (true if it held), recording meanwhile the
   * reports that change what people see.
   */
  waitFor: (test: () => boolean, timeoutMs?: number) => Promise<boolean>
}
