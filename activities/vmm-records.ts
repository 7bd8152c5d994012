/**
 * VMM records and host capacity: placement. Reports are applied to VMM records by
 * vmm-observations.ts.
 *
 * Placement is one transaction: it chooses a host (with room, and with the base image of a boot
 * disk not made yet), inserts the VMM's row and its reservation,
 * and records the instance's change that makes the VMM its active one. The VMM's ID is named by
 * the operation's placement decision (domain/decisions.ts), so a retry, a replay or a reset finds
 * the VMM that decision placed instead of placing a second one (I3), and no failure can leave a
 * VMM or a reservation that its instance's record does not name.
 */
import { v5 as uuidv5 } from 'uuid'
import type { InstanceSnapshot, MigrationTarget, PlacementRequest, PlacementResult } from '../contract/records.js'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { crashPoint } from '../faults/crash-points.js'
import { decisionKeys } from '../domain/decisions.js'
import { applyInstanceChange, readSnapshot } from './instance-records.js'

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
