/**
 * The contract between vmplane's workflows and everyone who starts them: the API, the activities
 * (a drain's migrations, the reconciler's re-drives and reports), the host agents and operators
 * with `temporal`/`tctl`. Workflow type names, the options every starter uses, the workflows'
 * inputs and IDs; the messages they take are in messages.ts. Renaming a type breaks runbooks and
 * running executions.
 *
 * Definitions only (docs/design.md §2): clients import it without pulling in workflow code, and
 * workflow code imports it, so it stays deterministic.
 */
import type { HostAnnouncement } from '../domain/host.js'
import type { InstanceState } from '../domain/instance.js'
import { instanceWorkflowId } from '../domain/ids.js'
import type { OperationKind } from '../domain/operation.js'
import type { OperationRequest } from '../domain/requests.js'
import type { VmmReport } from '../domain/vmm.js'
import { vmmReportSignal } from './messages.js'
import { HostIdKey, InstanceIdKey, InstanceStateKey, OperationKey, ProjectKey } from './search-attributes.js'

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
  reconcile: 'reconcile',
  firewall: 'applyFirewall'
} as const satisfies Record<OperationKind | 'reports' | 'host' | 'drain' | 'reconcile' | 'firewall', string>

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

/** Where every execution of an instance runs: under its workflow ID, with the workflow task timeout every starter sets. */
function underInstance (instanceId: string, taskQueue: string) {
  return { workflowId: instanceWorkflowId(instanceId), taskQueue, workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT }
}

/**
 * The options that start an operation's workflow (the API's, the reconciler's): under the
 * instance's ID, with its search attributes (the state as the starter saw it, and its project
 * when the starter knows it; the execution corrects or adds them from the record it reads), its
 * name in the memo and a line for the UI's list.
 */
export function operationStart (request: OperationRequest, instance: { name: string, state: InstanceState, projectId?: string }, taskQueue: string) {
  return {
    ...underInstance(request.instanceId, taskQueue),
    args: [request] as [OperationRequest],
    typedSearchAttributes: [
      { key: InstanceIdKey, value: request.instanceId },
      { key: OperationKey, value: request.kind },
      { key: InstanceStateKey, value: instance.state },
      ...(instance.projectId === undefined ? [] : [{ key: ProjectKey, value: instance.projectId }])
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

/**
 * The options of the `signalWithStart` that delivers a report: to whatever execution holds the
 * instance's workflow ID, or to a new `applyVmmReports` execution if none does.
 */
export function reportDelivery (report: VmmReport, taskQueue: string) {
  const args: [ApplyReportsInput] = [{ instanceId: report.instanceId }]
  return {
    ...underInstance(report.instanceId, taskQueue),
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

export interface MonitorHostInput {
  hostId: string
  /** Carried across continue-as-new, so a restart of the monitor does not forget the host. */
  lastAnnouncement: HostAnnouncement | null
  /** An operator's action received while the previous run continued as new. */
  operatorAction?: 'lost' | 'readmit' | null
  /** When the host's lease is to be judged next (workflow time, epoch ms), carried across continue-as-new. */
  judgeLeaseAt?: number | null
}

/** A change of the firewall rules, by the generation it took: each is told to the hosts once. */
export function firewallWorkflowId (generation: number): string {
  return `firewall-${generation}`
}

export interface ApplyFirewallInput {
  /** The live instances the change concerns: those it applies to, and those of the networks it links to theirs. */
  instanceIds: string[]
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
