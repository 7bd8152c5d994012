/**
 * Operation requests: what the API (or the reconciler, or an automatic restart) asks of an
 * instance, as the instance's workflow receives it. Each carries the operation's ID, chosen by
 * whoever accepted the request; every effect of the operation is keyed by it (domain/decisions.ts).
 */
import type { CloudInitInput, DiskSpec, HostFailurePolicy, InstanceShape, IntendedState, RestartPolicy } from './instance.js'

export interface OperationRequestBase {
  operationId: string
  instanceId: string
  requestedAt: string
}

/** A disk to create with the instance, its ID chosen by whoever accepted the request. */
export type NewDisk = DiskSpec

/** An interface to create with the instance; its address is allocated when its row is inserted. */
export interface NewInterface {
  id: string
  slot: number
  networkId: string
  /** The address asked for; null: the lowest free one. */
  ip: string | null
}

/** Everything the instance's rows are made of, so the workflow can ensure they exist. */
export interface NewInstance extends InstanceShape {
  /** The project that owns it; absent in histories recorded before projects: `default`. */
  projectId?: string
  name: string
  stopGraceSeconds: number
  restartPolicy: RestartPolicy
  /** Absent in histories recorded before hosts held leases: `fail`. */
  onHostFailure?: HostFailurePolicy
  intendedState: IntendedState
  /** Absent in histories recorded before disks existed. */
  disks?: NewDisk[]
  interfaces?: NewInterface[]
  cloudInit?: CloudInitInput | null
}

export interface CreateRequest extends OperationRequestBase {
  kind: 'create'
  instance: NewInstance
  /** Start the instance once it is created. */
  start: boolean
}

export interface StartRequest extends OperationRequestBase {
  kind: 'start'
  /** Set when the instance restarts by itself (restart policy `on-failure`): which attempt. */
  automaticAttempt?: number
}

export interface RebootRequest extends OperationRequestBase {
  kind: 'reboot'
}

/** Live migration of a running instance to another host (workflows/migrate.ts). */
export interface MigrateRequest extends OperationRequestBase {
  kind: 'migrate'
  /** The host to migrate to; absent: placement chooses one other than the source's. */
  targetHostId?: string
}

export interface StopRequest extends OperationRequestBase {
  kind: 'stop'
  /** Seconds from `requestedAt` the guest gets to power off before its VMM is killed. */
  graceSeconds: number
  /** Set when an operator forced the stop (`forceStop`): why, in their words. */
  forcedBy?: string
}

export interface DeleteRequest extends OperationRequestBase {
  kind: 'delete'
  graceSeconds: number
}

export type OperationRequest = CreateRequest | StartRequest | RebootRequest | MigrateRequest | StopRequest | DeleteRequest
export type HaltRequest = StopRequest | DeleteRequest
/** The requests an execution that only takes in reports may be handed, to run next. */
export type HandoffRequest = StartRequest | RebootRequest | MigrateRequest
/** The requests that boot a VMM. */
export type BootRequest = CreateRequest | StartRequest | RebootRequest

/** When a halt's grace period ends, in ms since the epoch. */
export function haltDeadlineOf (request: HaltRequest): number {
  return Date.parse(request.requestedAt) + request.graceSeconds * 1000
}
