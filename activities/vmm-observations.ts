/**
 * VMM observations: host reports, and the agent's answers to calls, applied to VMM records.
 *
 * An observation is applied only when its generation is newer than the last one applied, or it is
 * a conclusion of the control plane's about a VMM not yet gone (`isStaleReport` in domain/vmm.ts,
 * the same rule the workflow keeps in memory), so a report that arrives late or twice can never
 * move a VMM backwards (I4). A VMM that reaches a terminal state gives its reservation back; one
 * that runs marks its instance's disks made. When the instance's active VMM stops or starts
 * answering, the instance's events say so, once per generation. The statements are db/'s
 * (db/vmms.ts, db/instances.ts, db/instance-events.ts); each report runs them in one transaction.
 */
import { appendEvent } from '../db/instance-events.js'
import { isActiveVmmOf, markDisksMade } from '../db/instances.js'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { applyReportToVmm, findVmm, releaseReservation } from '../db/vmms.js'
import { decisionKeys } from '../domain/decisions.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { eventIdOf } from './instance-events.js'

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
  const terminal = isTerminalVmmState(report.state)
  const applied = await applyReportToVmm(tx, report, terminal)
  // A report that changed nothing (stale, or of a VMM gone) answers with the record as it is.
  if (applied === null) return await findVmm(tx, report.vmmId)
  const { vmm, unresponsiveBefore } = applied
  if (terminal) await releaseReservation(tx, vmm.id)
  // A VMM runs only once its disks are made (host-agent/supervisor/vmm-devices.ts).
  if (report.state === 'running') await markDisksMade(tx, instanceId)
  if ((unresponsiveBefore === null) !== (vmm.unresponsiveSince === null) && !terminal) {
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
