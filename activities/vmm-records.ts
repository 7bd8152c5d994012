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
 */
import { v5 as uuidv5 } from 'uuid'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { crashPoint } from '../faults/crash-points.js'
import { VMM_COLUMNS, toVmm } from '../db/rows.js'
import { decisionKeys } from '../domain/decisions.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { appendEvent, applyInstanceChange, eventIdOf, readSnapshot, type InstanceChange, type InstanceSnapshot } from './instance-records.js'

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
    const existing = await tx.query('SELECT host_id FROM vmms WHERE id = $1', [vmmId])
    let hostId = existing.rowCount === 0 ? null : existing.rows[0].host_id as string
    if (hostId === null) {
      const destroyed = await tx.query('SELECT 1 FROM instances WHERE id = $1 AND destroyed_at IS NOT NULL', [instanceId])
      if (destroyed.rowCount !== 0) return { placed: false, code: 'InstanceDestroyed', reason: 'the instance is destroyed', snapshot: await snapshotOf(tx, instanceId) }
      hostId = await reserveHost(tx, vmmId, instanceId, request)
    }
    if (hostId === null) {
      const reason = `no ${hostsConsidered(request.migrationTarget)} has ${request.vcpus} vCPUs and ${request.memoryMiB} MiB free${await imageNeeded(tx, instanceId)}`
      return { placed: false, code: 'NoCapacity', reason, snapshot: await snapshotOf(tx, instanceId) }
    }
    const target = request.migrationTarget
    if (target !== undefined) {
      await tx.query('UPDATE migrations SET target_vmm_id = $2, target_host_id = $3, updated_at = now() WHERE id = $1', [target.migrationId, vmmId, hostId])
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
  // Locking the active hosts serialises placements, so two can't both take the last room.
  await tx.query("SELECT id FROM hosts WHERE status = 'active' ORDER BY id FOR UPDATE")
  // A boot disk not made yet is made from its base image on the host that boots it, so that host
  // needs the image (the same version the create was checked against); once made, the disk is in
  // the shared storage and any host can run it.
  const { rows } = await tx.query(
    `SELECT h.id,
            h.vcpus - COALESCE(sum(r.vcpus), 0) AS free_vcpus,
            h.memory_mib - COALESCE(sum(r.memory_mib), 0) AS free_memory_mib
       FROM hosts h LEFT JOIN reservations r ON r.host_id = h.id
      WHERE h.status = 'active' AND h.cordoned_at IS NULL
        AND ($2::text IS NULL OR h.id = $2) AND ($3::text IS NULL OR h.id <> $3)
        AND NOT EXISTS (
          SELECT 1 FROM disks d
           WHERE d.instance_id = $1 AND d.image IS NOT NULL AND d.made_at IS NULL AND d.destroyed_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM host_images hi WHERE hi.host_id = h.id AND hi.name = d.image AND hi.sha256 = d.image_sha256))
      GROUP BY h.id
      ORDER BY h.id`,
    [instanceId, request.migrationTarget?.onlyHostId ?? null, request.migrationTarget?.excludeHostId ?? null]
  )
  const fitting = rows.filter((h) => h.free_vcpus >= request.vcpus && h.free_memory_mib >= request.memoryMiB)
  if (fitting.length === 0) return null
  // Spread: the host with the most free memory, then the most free vCPUs.
  fitting.sort((a, b) => b.free_memory_mib - a.free_memory_mib || b.free_vcpus - a.free_vcpus)
  const chosen = fitting[0].id as string
  await tx.query("INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, $3, 'starting')", [vmmId, instanceId, chosen])
  await tx.query(
    'INSERT INTO reservations (vmm_id, host_id, vcpus, memory_mib) VALUES ($1, $2, $3, $4)',
    [vmmId, chosen, request.vcpus, request.memoryMiB]
  )
  return chosen
}

/** ", and image X" when placement needs a host with the boot disk's base image. */
async function imageNeeded (tx: PoolClient, instanceId: string): Promise<string> {
  const { rows } = await tx.query(
    'SELECT image FROM disks WHERE instance_id = $1 AND image IS NOT NULL AND made_at IS NULL AND destroyed_at IS NULL',
    [instanceId]
  )
  return rows.length === 0 ? '' : ` with image ${rows[0].image}`
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
  const before = await tx.query('SELECT unresponsive_since FROM vmms WHERE id = $1 FOR UPDATE', [report.vmmId])
  if (before.rowCount === 0) return null
  const terminal = isTerminalVmmState(report.state)
  const { rows } = await tx.query(
    `UPDATE vmms v SET
        state = $3, generation = GREATEST(v.generation, $2), reason = $4, exit = $5, unresponsive_since = $6,
        migration = CASE WHEN $8 THEN $9::jsonb ELSE migration END,
        destroyed_at = CASE WHEN $7 THEN COALESCE(destroyed_at, now()) END,
        running_since = CASE WHEN $3 = 'running' THEN COALESCE(running_since, now()) ELSE running_since END,
        updated_at = now()
      WHERE v.id = $1 AND (v.generation < $2 OR $10)
        AND v.state NOT IN ('destroyed', 'failed', 'lost')
      RETURNING ${VMM_COLUMNS}`,
    [
      report.vmmId,
      report.generation,
      report.state,
      report.reason,
      report.exit === null ? null : JSON.stringify(report.exit),
      report.unresponsiveSince,
      terminal,
      report.migration !== undefined,
      report.migration == null ? null : JSON.stringify(report.migration),
      report.concluded === true
    ]
  )
  if (rows.length === 0) {
    const current = await tx.query(`SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.id = $1`, [report.vmmId])
    return toVmm(current.rows[0])
  }
  const vmm = toVmm(rows[0])
  if (terminal) await tx.query('DELETE FROM reservations WHERE vmm_id = $1', [vmm.id])
  // A VMM runs only once its disks are made (host-agent/supervisor/vmm-devices.ts).
  if (report.state === 'running') {
    await tx.query('UPDATE disks SET made_at = now() WHERE instance_id = $1 AND made_at IS NULL AND destroyed_at IS NULL', [instanceId])
  }
  if ((before.rows[0].unresponsive_since === null) !== (vmm.unresponsiveSince === null) && !terminal) {
    await noteResponsiveness(tx, instanceId, vmm)
  }
  return vmm
}

/** Tells the instance's events when its active VMM's API stops or starts answering again. */
async function noteResponsiveness (tx: PoolClient, instanceId: string, vmm: VmmRecord): Promise<void> {
  const active = await tx.query('SELECT 1 FROM instances WHERE id = $1 AND active_vmm_id = $2', [instanceId, vmm.id])
  if (active.rowCount === 0) return
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
