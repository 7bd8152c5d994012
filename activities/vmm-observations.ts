/**
 * VMM observations: host reports, and the agent's answers to calls, applied to VMM records.
 *
 * An observation is applied only when its generation is newer than the last one applied, or it is
 * a conclusion of the control plane's about a VMM not yet gone (`isStaleReport` in domain/vmm.ts,
 * the same rule the workflow keeps in memory), so a report that arrives late or twice can never
 * move a VMM backwards (I4). A VMM that reaches a terminal state gives its reservation back; one
 * that runs marks its instance's disks made. When the instance's active VMM stops or starts
 * answering, the instance's events say so, once per generation.
 */
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { VMM_COLUMNS, toVmm } from '../db/rows.js'
import { decisionKeys } from '../domain/decisions.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { appendEvent, eventIdOf } from './instance-events.js'

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
