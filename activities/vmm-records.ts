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
 *
 * The statements are db/'s (db/vmms.ts, db/hosts.ts, db/instances.ts, db/live-migrations.ts);
 * placement runs them in one transaction.
 *
 * A placement that asked the agent to boot its VMM (host-agent-calls.ts `bootPlaced`) and was
 * answered that the VM runs records the boot's end too, in a second transaction
 * (`finishPlacedBoot`): the change the workflow decided with the boot, under its decision key, so
 * a retried activity finds it made. The first transaction commits before the agent is asked (I3).
 */
import { v5 as uuidv5 } from 'uuid'
import type { InstanceSnapshot, MigrationTarget, PlacementRequest, PlacementResult } from '../contract/records.js'
import { hostsThatMayBoot, lockActiveHosts } from '../db/hosts.js'
import { imageToMake, isInstanceDestroyed } from '../db/instances.js'
import { setMigrationTarget } from '../db/live-migrations.js'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import { hostOfVmm, insertVmmWithReservation } from '../db/vmms.js'
import { crashPoint } from '../faults/crash-points.js'
import { decisionKeys } from '../domain/decisions.js'
import { chooseHost } from '../domain/placement.js'
import { applyInstanceChange, readSnapshot, recordInstanceChange, writeInstanceChange } from './instance-records.js'

/** The ID of the VMM an operation places: named by its placement decision. */
export function vmmIdOf (operationId: string): string {
  return uuidv5(decisionKeys.placed(operationId), VMM_NAMESPACE)
}
const VMM_NAMESPACE = '0e3f9a4c-3d2b-4c8e-8f61-6a0b7d9e2c15'

export async function placeVmm (pool: Pool, request: PlacementRequest): Promise<PlacementResult> {
  const result = await inTransaction(pool, async (tx): Promise<PlacementResult> => {
    const before = request.before === undefined ? null : await writeInstanceChange(tx, request.before)
    const vmmId = vmmIdOf(request.operationId)
    const { instanceId } = request.change
    let hostId = await hostOfVmm(tx, vmmId)
    if (hostId === null) {
      // The change before the placement locked the instance and knows whether it is destroyed.
      if (before?.destroyed ?? await isInstanceDestroyed(tx, instanceId)) return { placed: false, code: 'InstanceDestroyed', reason: 'the instance is destroyed', snapshot: await snapshotOf(tx, instanceId) }
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

/**
 * Records the boot's `finish` when the agent answered the placement's boot with the VM running:
 * named by the placed VMM and its host, with the answer as its observation.
 */
export async function finishPlacedBoot (pool: Pool, request: PlacementRequest, placement: PlacementResult): Promise<PlacementResult> {
  const finish = request.boot?.finish
  if (finish === undefined || !placement.placed || placement.booted?.state !== 'running') return placement
  const { vmmId, hostId, booted } = placement
  const finished = await recordInstanceChange(pool, { ...finish, vmmId, message: `${finish.message} on ${hostId}`, observations: [booted] })
  return { ...placement, finished }
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
  const chosen = chooseHost(hosts, request)
  if (chosen === null) return null
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
