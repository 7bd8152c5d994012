/**
 * Operation outcomes as worker metrics, served by the worker's Prometheus exporter beside the
 * SDK's own (worker/index.ts):
 *
 * - `vmplane_operations_finished_total{kind, status}`: operations that ended, by kind (create,
 *   start, stop, reboot, delete) and outcome (succeeded, failed, superseded);
 * - `vmplane_operation_duration_seconds{kind, status}`: from the request to that end;
 * - `vmplane_hosts_declared_lost_total{by}`: hosts declared lost, by an operator or by their lease
 *   (docs/design.md §17);
 * - `vmplane_host_failure_restarts_total`: instances restarted because their host failed
 *   (`onHostFailure: restart`).
 *
 * Temporal's workflow metric meter drops what is emitted while a history replays, so an outcome
 * counts once however often its execution is replayed. (A workflow task retried after a worker
 * died mid-task runs for real again, and may count its outcome a second time.)
 */
import { metricMeter } from '@temporalio/workflow'

// The runtime's exporter adds no suffixes to custom metrics: the names carry Prometheus' own.
import type { LostBy } from '../domain/host.js'
import type { OperationKind, OperationStatus } from '../domain/operation.js'

export function recordOperationOutcome (kind: OperationKind, status: OperationStatus, requestedAt: string): void {
  const tags = { kind, status }
  metricMeter.createCounter('vmplane_operations_finished_total', 'operations', 'Operations that ended, by kind and outcome').add(1, tags)
  const seconds = Math.max(0, Date.now() - Date.parse(requestedAt)) / 1000
  metricMeter.createHistogram('vmplane_operation_duration_seconds', 'float', 'seconds', 'From the request to the end of the operation').record(seconds, tags)
}

export function recordHostDeclaredLost (by: LostBy): void {
  metricMeter.createCounter('vmplane_hosts_declared_lost_total', 'hosts', 'Hosts declared lost, by an operator or by their lease').add(1, { by })
}

export function recordHostFailureRestart (): void {
  metricMeter.createCounter('vmplane_host_failure_restarts_total', 'instances', 'Instances restarted because their host failed').add(1)
}
