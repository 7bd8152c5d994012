/**
 * The messages vmplane's workflows take (Temporal's signals and queries), as the API, the
 * activities, the host agents and operators send them. Signal and query names are part of the
 * operator interface; renaming one breaks runbooks.
 *
 * Definitions only, like workflows.ts: clients import them without pulling in workflow code.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow'
import type { HostAnnouncement } from '../domain/host.js'
import type { InstanceState } from '../domain/instance.js'
import type { OperationKind } from '../domain/operation.js'
import type { HaltRequest, HandoffRequest } from '../domain/requests.js'
import type { VmmReport } from '../domain/vmm.js'

/** A host agent reports a VMM's state; the instance's running workflow consumes it. */
export const vmmReportSignal = defineSignal<[VmmReport]>('vmmReport')

/**
 * A stop or delete, delivered with signalWithStart: whatever execution runs for the instance
 * receives it and switches to the stop path (preemption), so a stop never waits behind a start.
 */
export const haltRequestedSignal = defineSignal<[HaltRequest]>('haltRequested')

/**
 * A start, reboot or migrate handed to the execution that is applying host reports, which runs it
 * next (by continuing as new) instead of making the user's request fail with a conflict.
 */
export const operationRequestedSignal = defineSignal<[HandoffRequest]>('operationRequested')

/**
 * Cancel the instance's live migration before its commit point (workflows/migrate.ts): its
 * target is killed and the VM stays on the source. Too late once the target has the VM: the
 * migration then completes. Ignored when the named migration is not the one running.
 */
export const cancelMigrationSignal = defineSignal<[{ migrationId: string, requestedBy: string }]>('cancelMigration')

/**
 * Operator: stop the instance now, killing its VMM without waiting for the guest. A stop with a
 * grace period of 0, whatever the instance is doing. Send it with
 * `temporal workflow signal -w instance-<id> --name forceStop` to a running execution, or with
 * `temporal workflow signal-with-start … --type applyVmmReports` when none runs.
 */
export const forceStopSignal = defineSignal<[{ reason?: string }?]>('forceStop')

/**
 * Operator: the host is gone for good (or must be treated so). Its VMMs become `lost`, which
 * fences them: their instances may start elsewhere at once, a stop in progress completes, and
 * the host's agent, if it is ever heard from again, is made to kill them (I6).
 */
export const declareHostLostSignal = defineSignal<[{ hostId: string }]>('declareHostLost')

/** Operator, on `host-<id>`: take a lost host back once its agent has killed every fenced VMM. */
export const readmitHostSignal = defineSignal('readmitHost')

/** What an operator sees with `temporal workflow query --name state`. */
export interface InstanceWorkflowState {
  instanceId: string
  /** The operation this execution is running, or `reports` when it only applies host reports. */
  operation: OperationKind | 'reports'
  operationId: string | null
  state: InstanceState | null
  phase: string
  vmmId: string | null
  hostId: string | null
  stopDeadline: string | null
  pendingReports: number
}
export const stateQuery = defineQuery<InstanceWorkflowState>('state')

/** A host agent's heartbeat; it also registers the host on first contact. */
export const hostHeartbeatSignal = defineSignal<[HostAnnouncement]>('hostHeartbeat')

/** Operator, on `drain-<hostId>`: stop draining. The API sends it when the host is uncordoned. */
export const stopDrainSignal = defineSignal('stopDrain')
