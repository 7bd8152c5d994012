/**
 * The contract between vmplane's workflows and everyone who starts or signals them: the API,
 * the host agents and operators with `temporal`/`tctl`. Signal and query names are part of the
 * operator interface; renaming one breaks runbooks.
 *
 * This module holds definitions only, so clients can import it without pulling in workflow code.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow'
import type { HostAnnouncement } from '../domain/host.js'
import type { InstanceState } from '../domain/instance.js'
import { instanceWorkflowId } from '../domain/ids.js'
import type { OperationKind } from '../domain/operation.js'
import type { HaltRequest, HandoffRequest, OperationRequest } from '../domain/requests.js'
import type { VmmReport } from '../domain/vmm.js'
import { HostIdKey, InstanceIdKey, InstanceStateKey, OperationKey } from './search-attributes.js'

/** Workflow type names, as the API and the agents start them. */
export const WORKFLOW_TYPES = {
  create: 'createInstance',
  start: 'startInstance',
  stop: 'stopInstance',
  reboot: 'rebootInstance',
  delete: 'deleteInstance',
  migrate: 'migrateInstance',
  reports: 'applyVmmReports',
  host: 'monitorHost',
  drain: 'drainHost',
  reconcile: 'reconcile'
} as const satisfies Record<OperationKind | 'reports' | 'host' | 'drain' | 'reconcile', string>

/** The Temporal Schedule that runs the reconciler; the worker creates or updates it at start. */
export const RECONCILE_SCHEDULE_ID = 'vmplane-reconciler'

/**
 * Every starter of an instance or host workflow sets this: a worker that dies holding a workflow
 * task gives it back within this time (Temporal's default is 10 s, too long for a stop's bound).
 */
export const WORKFLOW_TASK_TIMEOUT = '3 seconds'

export interface ApplyReportsInput {
  instanceId: string
}

/**
 * The options that start an operation's workflow (the API's, the reconciler's): under the
 * instance's ID, with its search attributes (the state as the starter saw it; the execution
 * corrects it if it has moved), its name in the memo and a line for the UI's list.
 */
export function operationStart (request: OperationRequest, instance: { name: string, state: InstanceState }, taskQueue: string) {
  return {
    workflowId: instanceWorkflowId(request.instanceId),
    taskQueue,
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    args: [request] as [OperationRequest],
    typedSearchAttributes: [
      { key: InstanceIdKey, value: request.instanceId },
      { key: OperationKey, value: request.kind },
      { key: InstanceStateKey, value: instance.state }
    ],
    memo: { instanceName: instance.name },
    staticSummary: summaryOf(request, instance.name)
  }
}

/** A line a person can read in the Temporal UI's workflow list. */
function summaryOf (request: OperationRequest, name: string): string {
  switch (request.kind) {
    case 'create': return `create ${name}${request.start ? ' and start it' : ''}`
    case 'stop':
    case 'delete': return `${request.kind} ${name} (grace ${request.graceSeconds} s)`
    case 'migrate': return `migrate ${name}${request.targetHostId === undefined ? '' : ` to ${request.targetHostId}`}`
    default: return `${request.kind} ${name}`
  }
}

/** A host agent reports a VMM's state; the instance's running workflow consumes it. */
export const vmmReportSignal = defineSignal<[VmmReport]>('vmmReport')

/**
 * The options of the `signalWithStart` that delivers a report: to whatever execution holds the
 * instance's workflow ID, or to a new `applyVmmReports` execution if none does.
 */
export function reportDelivery (report: VmmReport, taskQueue: string) {
  const args: [ApplyReportsInput] = [{ instanceId: report.instanceId }]
  return {
    workflowId: instanceWorkflowId(report.instanceId),
    taskQueue,
    workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
    args,
    signal: vmmReportSignal,
    signalArgs: [report] as [VmmReport],
    typedSearchAttributes: [
      { key: InstanceIdKey, value: report.instanceId },
      { key: HostIdKey, value: report.hostId },
      { key: OperationKey, value: 'reports' }
    ]
  }
}

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

export interface MonitorHostInput {
  hostId: string
  /** Carried across continue-as-new, so a restart of the monitor does not forget the host. */
  lastAnnouncement: HostAnnouncement | null
  /** An operator's action received while the previous run continued as new. */
  operatorAction?: 'lost' | 'readmit' | null
}

/** The workflow ID of a host's drain: one at a time per host. */
export function drainWorkflowId (hostId: string): string {
  return `drain-${hostId}`
}

export interface DrainHostInput {
  hostId: string
  /** The drain's record (`drains`), chosen by the API when it cordoned the host. */
  drainId: string
  /** Migrations in flight at once. */
  concurrency: number
  /** Carried across continue-as-new. */
  state?: DrainState
}

export interface DrainState {
  /** The migrate operation in flight for each instance being moved. */
  inFlight: Record<string, string>
  attempts: Record<string, number>
  found: string[]
  migrated: number
  gaveUp: string[]
  lastError: string | null
}

/** Operator, on `drain-<hostId>`: stop draining. The API sends it when the host is uncordoned. */
export const stopDrainSignal = defineSignal('stopDrain')
