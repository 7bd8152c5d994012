/**
 * VMM records and host capacity.
 *
 * Placement chooses a host and reserves capacity for one VMM in one transaction, keyed by the
 * VMM's ID (chosen by the workflow before this runs): a retry after a crash finds the VMM it
 * already placed instead of reserving twice (I3).
 *
 * Observations (host reports, and the agent's answers to calls) are applied only when their
 * generation is newer than the last one applied, so a report that arrives late or twice can
 * never move a VMM backwards (I4). A VMM that reaches a terminal state gives its reservation back.
 */
import { inTransaction, type Pool } from '../db/pool.js'
import { crashPoint } from '../faults/crash-points.js'
import { VMM_COLUMNS, toVmm } from '../db/rows.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { recordInstanceChange, type InstanceChange, type InstanceSnapshot } from './instance-records.js'

export interface PlacementRequest {
  vmmId: string
  vcpus: number
  memoryMiB: number
  /** The change that makes the new VMM the instance's active one. */
  change: InstanceChange
}

export type PlacementResult =
  | { placed: true, hostId: string, snapshot: InstanceSnapshot }
  | { placed: false, reason: string }

export async function placeVmm (pool: Pool, request: PlacementRequest): Promise<PlacementResult> {
  const hostId = await inTransaction(pool, async (tx) => {
    const existing = await tx.query('SELECT host_id FROM vmms WHERE id = $1', [request.vmmId])
    if (existing.rowCount !== 0) return existing.rows[0].host_id as string
    // Locking the active hosts serialises placements, so two can't both take the last room.
    await tx.query("SELECT id FROM hosts WHERE status = 'active' ORDER BY id FOR UPDATE")
    const { rows } = await tx.query(
      `SELECT h.id,
              h.vcpus - COALESCE(sum(r.vcpus), 0) AS free_vcpus,
              h.memory_mib - COALESCE(sum(r.memory_mib), 0) AS free_memory_mib
         FROM hosts h LEFT JOIN reservations r ON r.host_id = h.id
        WHERE h.status = 'active'
        GROUP BY h.id
        ORDER BY h.id`,
      []
    )
    const fitting = rows.filter((h) => h.free_vcpus >= request.vcpus && h.free_memory_mib >= request.memoryMiB)
    if (fitting.length === 0) return null
    // Spread: the host with the most free memory, then the most free vCPUs.
    fitting.sort((a, b) => b.free_memory_mib - a.free_memory_mib || b.free_vcpus - a.free_vcpus)
    const chosen = fitting[0].id as string
    await tx.query(
      "INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, $3, 'starting')",
      [request.vmmId, request.change.instanceId, chosen]
    )
    await tx.query(
      'INSERT INTO reservations (vmm_id, host_id, vcpus, memory_mib) VALUES ($1, $2, $3, $4)',
      [request.vmmId, chosen, request.vcpus, request.memoryMiB]
    )
    return chosen
  })
  crashPoint('place.after-commit')
  if (hostId === null) {
    return {
      placed: false,
      reason: `no active host has ${request.vcpus} vCPUs and ${request.memoryMiB} MiB free`
    }
  }
  const snapshot = await recordInstanceChange(pool, {
    ...request.change,
    vmmId: request.vmmId,
    details: { ...request.change.details, hostId },
    message: `${request.change.message} on ${hostId}`
  })
  return { placed: true, hostId, snapshot }
}

export interface ObservationResult {
  /** False when the observation was stale or named a VMM the control plane does not know. */
  applied: boolean
  vmm: VmmRecord | null
}

export async function applyVmmObservation (pool: Pool, report: VmmReport): Promise<ObservationResult> {
  return await inTransaction(pool, async (tx) => {
    const terminal = isTerminalVmmState(report.state)
    const { rows } = await tx.query(
      `UPDATE vmms v SET
          state = $3, generation = $2, reason = $4, exit = $5, unresponsive_since = $6,
          destroyed_at = CASE WHEN $7 THEN COALESCE(destroyed_at, now()) END,
          running_since = CASE WHEN $3 = 'running' THEN COALESCE(running_since, now()) ELSE running_since END,
          updated_at = now()
        WHERE v.id = $1 AND v.generation < $2
          AND v.state NOT IN ('destroyed', 'failed', 'lost')
        RETURNING ${VMM_COLUMNS}`,
      [
        report.vmmId,
        report.generation,
        report.state,
        report.reason,
        report.exit === null ? null : JSON.stringify(report.exit),
        report.unresponsiveSince,
        terminal
      ]
    )
    if (rows.length > 0) {
      if (terminal) await tx.query('DELETE FROM reservations WHERE vmm_id = $1', [report.vmmId])
      return { applied: true, vmm: toVmm(rows[0]) }
    }
    const current = await tx.query(`SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.id = $1`, [report.vmmId])
    return { applied: false, vmm: current.rows.length > 0 ? toVmm(current.rows[0]) : null }
  })
}
