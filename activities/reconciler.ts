/**
 * Theory of operation: the reconciler's activities (I3, I5). Each pass of the `reconcile`
 * workflow compares what the hosts have with what PostgreSQL records and mends the difference,
 * only ever through the paths everything else uses: an agent's DELETE, a report to the
 * instance's workflow, an operation started under the instance's workflow ID.
 *
 * Per reachable host:
 * - a live VMM the control plane does not know, or knows as gone, or whose instance is destroyed,
 *   is an orphan: reaped (logged first) once older than the orphan grace period, which leaves a
 *   start in flight the time to record what it made;
 * - a VMM process no agent record owns (a stray) is reaped the same way;
 * - a TAP no live VMM on the host has is removed (the agent checks again, once no change of
 *   that TAP is in flight, that no VMM took it meanwhile);
 * - a VMM the agent reports at a newer generation than PostgreSQL holds is reported again (a
 *   report that never arrived), once its last change is older than the grace period: a change
 *   younger than that is still on its way, in an ensure's answer or the agent's outbox;
 * - a VMM PostgreSQL believes live that the agent has no record of, though the agent has
 *   reported it before, is reported gone once the agent, asked about that VMM after PostgreSQL
 *   was read, affirms it does not have it: one of the positive signals that may end a VMM (I2). One never reported belongs to the start that
 *   placed it, which may not have reached the agent yet (a worker killed between placement and
 *   the agent's call): that start's boot deadline, not the reconciler, decides its fate.
 * Per instance: one left in a transitional state, or whose intent its state does not meet, with
 * no workflow running for it, has its operation re-driven (`convergenceFor`); operations left
 * `running` with no execution running for their instance are closed as interrupted (I5); one whose
 * active VMM was fenced with a lost host while its record still reads it live is told again.
 * The storage every host mounts, read through one active host: a disk no live disk row names,
 * a seed of an instance that is not live, and a file left half-made are removed once older than
 * the grace period (their rows come before them, and go after them, so none of these can be in
 * use). Then leaked reservations, addresses and disk space (held for a destroyed instance) are
 * released and expired idempotency keys dropped. Every pass records what it found and did.
 *
 * The passes over a host and over the storage are host-reconciliation.ts's; what each mends is
 * decided in domain/reconciliation.ts. The statements are db/'s, in the repository of the table
 * each reads or writes.
 */
import { activityInfo, getClient, log } from '@temporalio/activity'
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client'
import type { ReconcilerActivities } from '../contract/activities.js'
import { haltRequestedSignal } from '../contract/messages.js'
import { operationStart, WORKFLOW_TYPES } from '../contract/workflows.js'
import { activeHostIds } from '../db/hosts.js'
import { purgeExpiredKeys } from '../db/idempotency-keys.js'
import { instancesNotMeetingIntent, releaseDevicesOfDestroyedInstances } from '../db/instances.js'
import { liveMigrationOf } from '../db/live-migrations.js'
import {
  closeOperationAsInterrupted, insertOperation, operationsInFlightFor, operationsInFlightOf, type OperationInFlight
} from '../db/operations.js'
import type { Pool } from '../db/pool.js'
import { insertReconcilePass } from '../db/reconcile-passes.js'
import { activeVmmsLostUnnoticed, releaseReservationsOfGoneVmms } from '../db/vmms.js'
import { instanceWorkflowId } from '../domain/ids.js'
import { convergenceFor } from '../domain/instance-rules.js'
import type { OperationRequest } from '../domain/requests.js'
import { tellLost } from './host-fencing.js'
import { reconcileHost, reconcileStorage, type ReconcilerDependencies } from './host-reconciliation.js'

export function createReconciler (deps: ReconcilerDependencies): ReconcilerActivities {
  const { pool } = deps
  return {
    async reconcilableHosts () {
      return await activeHostIds(pool)
    },

    async reconcileHost (hostId) {
      return await reconcileHost(deps, hostId)
    },

    /** The storage every host mounts, read through `hostId`'s agent (see the module comment). */
    async reconcileStorage (hostId) {
      return await reconcileStorage(deps, hostId)
    },

    /**
     * Addresses and disk space still held for destroyed instances: released (the destroyed
     * instance's end releases them in the same transaction, so this finds none unless that was
     * bypassed).
     */
    async releaseLeakedAddresses () {
      return await releaseDevicesOfDestroyedInstances(pool)
    },

    /** Instances whose state does not meet their intent, untouched for the grace period. */
    async driftedInstances () {
      return (await instancesNotMeetingIntent(pool, deps.orphanGraceMs))
        .filter((i) => convergenceFor(i.state, i.intendedState) !== null)
    },

    /** Re-drives one instance's intent unless a workflow runs for it; what was done, or null. */
    async redriveInstance (instance, operationId) {
      const temporal = getClient()
      const workflowId = instanceWorkflowId(instance.id)
      if (await workflowRunning(workflowId)) return null
      const kind = convergenceFor(instance.state, instance.intendedState)
      if (kind === null) return null
      const base = { operationId, instanceId: instance.id, requestedAt: new Date().toISOString() }
      let request: OperationRequest
      if (kind === 'migrate') {
        // The migration's own operation, carried on from its record (workflows/migrate.ts).
        const migration = await liveMigrationOf(pool, instance.id)
        if (migration === null) return null
        request = migration
      } else {
        request = kind === 'start' ? { ...base, kind } : { ...base, kind, graceSeconds: instance.stopGraceSeconds }
        await closeAbandonedOperationsOf(pool, instance.id, 'no workflow was running this operation; the reconciler re-drove the instance')
      }
      const options = operationStart(request, instance, activityInfo().taskQueue)
      let runId: string
      try {
        runId = request.kind === 'start' || request.kind === 'migrate'
          ? (await temporal.workflow.start(WORKFLOW_TYPES[request.kind], { ...options, workflowIdConflictPolicy: 'FAIL' })).firstExecutionRunId
          : (await temporal.workflow.signalWithStart(WORKFLOW_TYPES[request.kind], { ...options, signal: haltRequestedSignal, signalArgs: [request] })).signaledRunId
      } catch (err) {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return null
        throw err
      }
      await insertOperation(pool, request, runId)
      const action = `re-drove instance ${instance.name} (${instance.id}), ${instance.state} but meant to be ${instance.intendedState}: ${kind}`
      log.warn(action, { instanceId: instance.id })
      return action
    },

    /**
     * Operations left in flight, past the grace period, with no execution running under their
     * instance's workflow ID (one failed, or was terminated by an operator): closed as
     * interrupted, so that every accepted request ends in a recorded outcome (I5).
     */
    async closeAbandonedOperations () {
      const closed: string[] = []
      for (const op of await operationsInFlightFor(pool, deps.orphanGraceMs)) {
        if (!await closeIfAbandoned(pool, op, 'no workflow was running this operation any more (found by the reconciler)')) continue
        const action = `closed ${op.kind} operation ${op.id} of instance ${op.instance_id} as interrupted: no workflow runs it`
        log.warn(action, { instanceId: op.instance_id })
        closed.push(action)
      }
      return closed
    },

    /**
     * Instances whose active VMM was fenced with its lost host while their record still reads it
     * live (the fan-out's signal never reached them, activities/host-fencing.ts): told again,
     * once untouched for the grace period.
     */
    async retellHostLosses () {
      const told: string[] = []
      for (const { vmm, instanceName } of await activeVmmsLostUnnoticed(pool, deps.orphanGraceMs)) {
        await tellLost([vmm])
        const action = `told instance ${instanceName} (${vmm.instanceId}) again that its VMM ${vmm.id} was fenced with lost host ${vmm.hostId}`
        log.warn(action, { instanceId: vmm.instanceId })
        told.push(action)
      }
      return told
    },

    /** Reservations still held for VMMs that are gone. */
    async releaseLeakedReservations () {
      return await releaseReservationsOfGoneVmms(pool)
    },

    async purgeIdempotencyKeys () {
      return await purgeExpiredKeys(pool)
    },

    async recordReconcilePass (pass) {
      await insertReconcilePass(pool, pass)
    }
  }
}

/** Whether an execution runs under this workflow ID now (or, given a run ID, whether that run does). */
async function workflowRunning (workflowId: string, runId?: string): Promise<boolean> {
  try {
    return (await getClient().workflow.getHandle(workflowId, runId).describe()).status.name === 'RUNNING'
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false
    throw err
  }
}

/**
 * Ends an operation in flight as interrupted, saying why, but only if it is abandoned: the run
 * that accepted it (or last recorded it) has closed and no run of its workflow ID is running.
 * The run is named, because between reading the operation and ending it the API may have
 * accepted a new request, whose operation belongs to a new run: that one is never touched.
 */
async function closeIfAbandoned (pool: Pool, op: OperationInFlight, why: string): Promise<boolean> {
  if (await workflowRunning(op.workflow_id)) return false
  if (op.run_id !== null && await workflowRunning(op.workflow_id, op.run_id)) return false
  return await closeOperationAsInterrupted(pool, op, why)
}

/** Closes the instance's operations in flight that no run carries any more (`closeIfAbandoned`). */
async function closeAbandonedOperationsOf (pool: Pool, instanceId: string, why: string): Promise<void> {
  for (const op of await operationsInFlightOf(pool, instanceId)) await closeIfAbandoned(pool, op, why)
}
