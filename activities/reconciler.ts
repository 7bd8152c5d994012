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
 *   report that never arrived);
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
 * The statements are db/'s, in the repository of the table each reads or writes.
 */
import { activityInfo, getClient, log } from '@temporalio/activity'
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client'
import type { HostReconciliation, ReconcileCounts, ReconcilerActivities } from '../contract/activities.js'
import { haltRequestedSignal } from '../contract/messages.js'
import { operationStart, reportDelivery, WORKFLOW_TYPES } from '../contract/workflows.js'
import { activeHostIds } from '../db/hosts.js'
import { purgeExpiredKeys } from '../db/idempotency-keys.js'
import { instancesNotMeetingIntent, liveDiskIds, liveInstanceIds, releaseDevicesOfDestroyedInstances } from '../db/instances.js'
import { liveMigrationOf } from '../db/live-migrations.js'
import {
  closeOperationAsInterrupted, insertOperation, operationsInFlightFor, operationsInFlightOf, type OperationInFlight
} from '../db/operations.js'
import type { Pool } from '../db/pool.js'
import { insertReconcilePass } from '../db/reconcile-passes.js'
import { activeVmmsLostUnnoticed, knownVmmsOn, releaseReservationsOfGoneVmms } from '../db/vmms.js'
import type { StorageListing, StrayView, TapView, VmmView } from '../domain/host-agent-api.js'
import { instanceWorkflowId } from '../domain/ids.js'
import { convergenceFor } from '../domain/instance-rules.js'
import { concludedReport, isTerminalVmmState, type VmmReport } from '../domain/vmm.js'
import type { OperationRequest } from '../domain/requests.js'
import { onAgent, toReport, type AgentCallDependencies } from './host-agent-calls.js'
import { tellLost } from './host-fencing.js'

/** Actions listed per pass at most (the counts are complete). */
const MAX_ACTIONS = 100

interface ReconcilerDependencies extends AgentCallDependencies {
  orphanGraceMs: number
}

export function createReconciler (deps: ReconcilerDependencies): ReconcilerActivities {
  const { pool, client: agents } = deps

  async function report (vmmReport: VmmReport): Promise<void> {
    await getClient().workflow.signalWithStart(WORKFLOW_TYPES.reports, reportDelivery(vmmReport, activityInfo().taskQueue))
  }

  return {
    async reconcilableHosts () {
      return await activeHostIds(pool)
    },

    async reconcileHost (hostId) {
      const result = new Tally(hostId)
      const { count } = result
      const act = result.act.bind(result)
      let vmms: VmmView[]
      let strays: StrayView[]
      let taps: TapView[]
      try {
        vmms = await onAgent(deps, hostId, (url) => agents.listVmms(url))
        strays = await onAgent(deps, hostId, (url) => agents.listStrays(url))
        taps = await onAgent(deps, hostId, (url) => agents.listTaps(url))
      } catch {
        return result.unreachable()
      }
      const known = await knownVmmsOn(pool, hostId, vmms.map((v) => v.id))
      const now = Date.now()
      const young = (since: string): boolean => now - Date.parse(since) < deps.orphanGraceMs

      for (const view of vmms) {
        const row = known.get(view.id)
        if (!isTerminalVmmState(view.state) && (row === undefined || isTerminalVmmState(row.vmm.state) || row.instanceDestroyed)) {
          if (young(view.createdAt)) { count('orphansWaiting'); continue }
          const why = row === undefined
            ? 'unknown to the control plane'
            : row.instanceDestroyed ? 'its instance is destroyed' : `recorded ${row.vmm.state}`
          await act('orphansReaped', `reaping orphan VMM ${view.id} of instance ${view.instanceId} on ${hostId}: ${why}`,
            { vmmId: view.id, instanceId: view.instanceId }, () => onAgent(deps, hostId, (url) => agents.destroyVmm(url, view.id)))
        } else if (row !== undefined && !isTerminalVmmState(row.vmm.state) && view.generation > row.vmm.generation) {
          await act('reportsResent', `reporting VMM ${view.id} again: the agent is at generation ${view.generation}, PostgreSQL at ${row.vmm.generation}`,
            { vmmId: view.id, instanceId: view.instanceId }, () => report(toReport(view, hostId)))
        }
      }
      const onAgentNow = new Set(vmms.map((v) => v.id))
      for (const { vmm } of known.values()) {
        // A VMM its host has never reported may not be there yet: the start that placed it is
        // still on its way to the agent, and its own boot deadline ends it if it never arrives.
        if (isTerminalVmmState(vmm.state) || onAgentNow.has(vmm.id) || vmm.generation === 0 || young(vmm.createdAt)) continue
        // The inventory was read before PostgreSQL: a VMM created on the agent in between, and
        // reported, is missing from it (the 4,000-instance campaign failed a running VM so). Only
        // the agent's answer about this VMM, now, says it is gone; no answer says nothing.
        const asked = await onAgent(deps, hostId, (url) => agents.findVmm(url, vmm.id)).catch(() => undefined)
        if (asked !== null) continue
        await act('vmmsGone', `reporting VMM ${vmm.id} of instance ${vmm.instanceId} gone: ${hostId} has no record of it`,
          { vmmId: vmm.id, instanceId: vmm.instanceId }, () => report(concludedReport(vmm, 'destroyed', 'the host agent has no record of this VMM (found by the reconciler)', new Date().toISOString())))
      }
      for (const stray of strays) {
        if (young(stray.startedAt)) { count('straysWaiting'); continue }
        await act('straysReaped', `reaping stray VMM process ${stray.pid} on ${hostId} (${stray.apiSocket}): no record owns it`,
          {}, () => onAgent(deps, hostId, (url) => agents.reapStray(url, stray)))
      }
      for (const tap of taps) {
        if (tap.vmmId !== null) continue
        await act('tapsReaped', `removing TAP ${tap.name} on ${hostId}: no live VMM has it`,
          {}, () => onAgent(deps, hostId, (url) => agents.removeTap(url, tap.name)))
      }
      return result.done()
    },

    /** The storage every host mounts, read through `hostId`'s agent (see the module comment). */
    async reconcileStorage (hostId) {
      const result = new Tally(hostId)
      let listing: StorageListing
      try {
        listing = await onAgent(deps, hostId, (url) => agents.listStorage(url))
      } catch {
        return result.unreachable()
      }
      const liveDisks = await liveDiskIds(pool, listing.disks.map((disk) => disk.diskId))
      const liveInstances = await liveInstanceIds(pool, listing.seeds.map((seed) => seed.instanceId))
      const orphans = [
        ...listing.disks.filter((disk) => !liveDisks.has(disk.diskId))
          .map((disk) => ({ kind: 'disks' as const, counted: 'disksReaped', name: disk.diskId, modifiedAt: disk.modifiedAt, why: 'no live disk is recorded with its ID' })),
        ...listing.seeds.filter((seed) => !liveInstances.has(seed.instanceId))
          .map((seed) => ({ kind: 'seeds' as const, counted: 'seedsReaped', name: seed.instanceId, modifiedAt: seed.modifiedAt, why: 'its instance is not live' })),
        ...listing.partial
          .map((file) => ({ kind: 'partial' as const, counted: 'partialFilesReaped', name: file.name, modifiedAt: file.modifiedAt, why: 'left half-made' }))
      ]
      const now = Date.now()
      for (const orphan of orphans) {
        if (now - Date.parse(orphan.modifiedAt) < deps.orphanGraceMs) {
          result.count('storageWaiting')
          continue
        }
        await result.act(orphan.counted, `removing ${orphan.kind}/${orphan.name} from the storage: ${orphan.why}`,
          {}, () => onAgent(deps, hostId, (url) => agents.removeStored(url, orphan.kind, orphan.name)))
      }
      return result.done()
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
        await tellLost(vmm)
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

/** What one host's pass found and did: counts by kind, and the actions (at most MAX_ACTIONS). */
class Tally {
  readonly counts: ReconcileCounts = {}
  readonly actions: string[] = []

  constructor (readonly hostId: string) {}

  readonly count = (kind: string): void => { this.counts[kind] = (this.counts[kind] ?? 0) + 1 }

  /**
   * Does one thing, logged before it is done with what it is about; one that fails is counted
   * and left for the next pass.
   */
  async act (kind: string, action: string, about: { vmmId?: string, instanceId?: string }, deed: () => Promise<unknown>): Promise<void> {
    log.warn(action, { hostId: this.hostId, ...about })
    try {
      await deed()
      this.count(kind)
      this.#note(action)
    } catch (err) {
      this.count('actionsFailed')
      this.#note(`failed: ${action}: ${(err as Error).message}`)
    }
  }

  done (): HostReconciliation {
    return { hostId: this.hostId, reachable: true, counts: this.counts, actions: this.actions }
  }

  unreachable (): HostReconciliation {
    return { hostId: this.hostId, reachable: false, counts: {}, actions: [] }
  }

  #note (action: string): void {
    if (this.actions.length < MAX_ACTIONS) this.actions.push(action)
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
