/**
 * VMM records and host capacity.
 *
 * Placement is one transaction: it chooses a host (with room, and with the base image of a boot
 * disk not made yet), inserts the VMM's row and its reservation,
 * and records the instance's change that makes the VMM its active one. The VMM's ID is named by
 * the operation's placement decision (domain/decisions.ts), so a retry, a replay or a reset finds
 * the VMM that decision placed instead of placing a second one (I3), and no failure can leave a
 * VMM or a reservation that its instance's record does not name.
 *
 * Observations (host reports, and the agent's answers to calls) are applied only when their
 * generation is newer than the last one applied, and a conclusion of the control plane's to a VMM
 * not yet gone (`isStaleReport` in domain/vmm.ts, the same rule the workflow keeps in memory), so a
 * report that arrives late or twice can never move a VMM backwards (I4). A VMM
 * that reaches a terminal state gives its reservation back. When the instance's active VMM stops
 * or starts answering, the instance's events say so, once per generation.
 *
 * The statements are db/'s (db/vmms.ts, db/hosts.ts, db/instances.ts, db/live-migrations.ts,
 * db/instance-events.ts); placement and each report run theirs in one transaction.
 */
import { v5 as uuidv5 } from 'uuid'
import { hostsThatMayBoot, lockActiveHosts } from '../db/hosts.js'
import { appendEvent } from '../db/instance-events.js'
import { imageToMake, isActiveVmmOf, isInstanceDestroyed, markDisksMade } from '../db/instances.js'
import { setMigrationTarget } from '../db/live-migrations.js'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { applyReportToVmm, hostOfVmm, insertVmmWithReservation, lockVmm, readVmm, releaseReservation } from '../db/vmms.js'
import { crashPoint } from '../faults/crash-points.js'
import { decisionKeys } from '../domain/decisions.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { applyInstanceChange, eventIdOf, readSnapshot, type InstanceChange, type InstanceSnapshot } from './instance-records.js'

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
}

export interface MigrationTarget {
  migrationId: string
  /** The host the request named; null: any host but the source's. */
  onlyHostId: string | null
  excludeHostId: string
}

export type PlacementResult =
  | { placed: true, vmmId: string, hostId: string, snapshot: InstanceSnapshot }
  | { placed: false, code: 'NoCapacity' | 'InstanceDestroyed', reason: string, snapshot: InstanceSnapshot }

/** The ID of the VMM an operation places: named by its placement decision. */
export function vmmIdOf (operationId: string): string {
  return uuidv5(decisionKeys.placed(operationId), VMM_NAMESPACE)
}
const VMM_NAMESPACE = '0e3f9a4c-3d2b-4c8e-8f61-6a0b7d9e2c15'

export async function placeVmm (pool: Pool, request: PlacementRequest): Promise<PlacementResult> {
  const result = await inTransaction(pool, async (tx): Promise<PlacementResult> => {
    if (request.before !== undefined) await applyInstanceChange(tx, request.before)
    const vmmId = vmmIdOf(request.operationId)
    const { instanceId } = request.change
    let hostId = await hostOfVmm(tx, vmmId)
    if (hostId === null) {
      if (await isInstanceDestroyed(tx, instanceId)) return { placed: false, code: 'InstanceDestroyed', reason: 'the instance is destroyed', snapshot: await snapshotOf(tx, instanceId) }
      hostId = await reserveHost(tx, vmmId, instanceId, request)
    }
    if (hostId === null) {
      const reason = `no ${hostsConsidered(request.migrationTarget)} has ${request.vcpus} vCPUs and ${request.memoryMiB} MiB free${await imageNeeded(tx, instanceId)}`
      return { placed: false, code: 'NoCapacity', reason, snapshot: await snapshotOf(tx, instanceId) }
    }
    const target = request.migrationTarget
    if (target !== undefined) {
      await setMigrationTarget(tx, target.migrationId, vmmId, hostId)
    }
    const placed = await applyInstanceChange(tx, {
      ...request.change,
      vmmId,
      set: target === undefined ? { ...request.change.set, activeVmmId: vmmId } : request.change.set,
      details: { ...request.change.details, hostId },
      message: `${request.change.message} ${vmmId} on ${hostId}`
    })
    return { placed: true, vmmId, hostId, snapshot: placed.snapshot }
  })
  crashPoint('place.after-commit')
  return result
}

function hostsConsidered (target: MigrationTarget | undefined): string {
  if (target === undefined) return 'active uncordoned host'
  return target.onlyHostId !== null ? `host ${target.onlyHostId} that is active and uncordoned` : `active uncordoned host other than ${target.excludeHostId}`
}

/**
 * Chooses a host with room and reserves it for the VMM; null when no host has room. A cordoned
 * host takes nothing new; a migration's target is on another host than its source.
 */
async function reserveHost (tx: PoolClient, vmmId: string, instanceId: string, request: PlacementRequest): Promise<string | null> {
  await lockActiveHosts(tx)
  const hosts = await hostsThatMayBoot(tx, instanceId, request.migrationTarget?.onlyHostId ?? null, request.migrationTarget?.excludeHostId ?? null)
  const fitting = hosts.filter((h) => h.freeVcpus >= request.vcpus && h.freeMemoryMiB >= request.memoryMiB)
  if (fitting.length === 0) return null
  // Spread: the host with the most free memory, then the most free vCPUs.
  fitting.sort((a, b) => b.freeMemoryMiB - a.freeMemoryMiB || b.freeVcpus - a.freeVcpus)
  const chosen = fitting[0].id
  await insertVmmWithReservation(tx, { id: vmmId, instanceId, hostId: chosen, vcpus: request.vcpus, memoryMiB: request.memoryMiB })
  return chosen
}

/** ", and image X" when placement needs a host with the boot disk's base image. */
async function imageNeeded (tx: PoolClient, instanceId: string): Promise<string> {
  const image = await imageToMake(tx, instanceId)
  return image === null ? '' : ` with image ${image}`
}

async function snapshotOf (tx: PoolClient, instanceId: string): Promise<InstanceSnapshot> {
  const snapshot = await readSnapshot(tx, instanceId)
  if (snapshot === null) throw new Error(`instance ${instanceId} does not exist`)
  return snapshot
}

/**
 * Applies reports to their VMMs' records; returns each VMM's record as it now is (VMMs the
 * control plane does not know are left out).
 */
export async function applyObservations (tx: PoolClient, instanceId: string, reports: VmmReport[]): Promise<VmmRecord[]> {
  const records = new Map<string, VmmRecord>()
  for (const report of reports) {
    const vmm = await applyObservation(tx, instanceId, report)
    if (vmm !== null) records.set(vmm.id, vmm)
  }
  return [...records.values()]
}

async function applyObservation (tx: PoolClient, instanceId: string, report: VmmReport): Promise<VmmRecord | null> {
  const before = await lockVmm(tx, report.vmmId)
  if (before === undefined) return null
  const terminal = isTerminalVmmState(report.state)
  const vmm = await applyReportToVmm(tx, report, terminal)
  if (vmm === null) return await readVmm(tx, report.vmmId)
  if (terminal) await releaseReservation(tx, vmm.id)
  // A VMM runs only once its disks are made (host-agent/supervisor/vmm-devices.ts).
  if (report.state === 'running') await markDisksMade(tx, instanceId)
  if ((before.unresponsiveSince === null) !== (vmm.unresponsiveSince === null) && !terminal) {
    await noteResponsiveness(tx, instanceId, vmm)
  }
  return vmm
}

/** Tells the instance's events when its active VMM's API stops or starts answering again. */
async function noteResponsiveness (tx: PoolClient, instanceId: string, vmm: VmmRecord): Promise<void> {
  if (!await isActiveVmmOf(tx, instanceId, vmm.id)) return
  await appendEvent(tx, {
    eventId: eventIdOf(decisionKeys.responsiveness(vmm.id, vmm.generation)),
    instanceId,
    kind: 'condition-changed',
    vmmId: vmm.id,
    message: vmm.unresponsiveSince !== null
      ? `VMM API unresponsive since ${vmm.unresponsiveSince}; its process lives, and the state is unchanged`
      : 'VMM API answers again'
  })
}

/** Reports received while no change was due, recorded on their own. */
export async function recordVmmObservations (pool: Pool, instanceId: string, reports: VmmReport[]): Promise<VmmRecord[]> {
  return await inTransaction(pool, async (tx) => await applyObservations(tx, instanceId, reports))
}
