/**
 * Fencing a host an operator declared lost (I6).
 *
 * Declaring a host lost is the one way a VMM whose process nobody can see ends: every VMM of
 * the host that is not confirmed gone becomes `lost` (terminal), its reservation is released,
 * and each instance that had one is told, so its execution settles it (a stop in progress
 * completes; a running instance fails with `HostLost`; a new start may proceed at once).
 *
 * The telling is a durable fan-out. The fence is committed first; then every VMM the host's loss
 * fenced (this declaration's and any earlier one's, until the host's agent is heard again and
 * destroys them) is reported `lost` to its instance. A retry of the activity (its worker killed
 * midway, say) finds the fence made and tells every instance again, so an instance the attempt
 * before did not reach is told, and one it reached takes the same report as the one it had: the
 * report is a conclusion keyed by the VMM, and a VMM gone stays gone (domain/vmm.ts). Should an
 * instance still not hear it (the retries given up), the reconciler tells it again
 * (activities/reconciler.ts): every instance's record meets its host's loss.
 *
 * A lost host stays lost. Should its agent be heard from again, every lost VMM on it is
 * destroyed through the agent before anything else, and recorded fenced; only once none is left
 * unfenced may an operator re-admit the host.
 *
 * The statements are db/'s (db/hosts.ts, db/vmms.ts); the fence is one transaction.
 */
import { activityInfo, getClient } from '@temporalio/activity'
import type { HostFencingActivities } from '../contract/activities.js'
import { reportDelivery, WORKFLOW_TYPES } from '../contract/workflows.js'
import { readmitFencedHost, setHostLost } from '../db/hosts.js'
import type { LostBy } from '../domain/host.js'
import { inTransaction, type PoolClient } from '../db/pool.js'
import { fenceVmmsOnHost, markVmmFenced, unfencedLostVmmsOn } from '../db/vmms.js'
import { concludedReport, type VmmRecord } from '../domain/vmm.js'
import { onAgent, type AgentCallDependencies } from './host-agent-calls.js'

const OPERATOR_REASON = 'host declared lost by an operator; VMM fenced'

/**
 * Fences the host and its live VMMs, in the caller's transaction; returns every VMM its loss
 * fenced that its agent has not destroyed yet.
 */
export async function markHostLost (tx: PoolClient, hostId: string, by: LostBy, reason: string): Promise<VmmRecord[]> {
  await setHostLost(tx, hostId, by, reason)
  await fenceVmmsOnHost(tx, hostId, reason)
  return await unfencedLostVmmsOn(tx, hostId)
}

/** Reports each VMM lost to its instance, starting an execution to take it in if none runs. */
export async function tellLost (vmms: VmmRecord[]): Promise<void> {
  for (const vmm of vmms) {
    await getClient().workflow.signalWithStart(WORKFLOW_TYPES.reports, reportDelivery(concludedReport(vmm, 'lost', vmm.reason ?? OPERATOR_REASON, new Date().toISOString()), activityInfo().taskQueue))
  }
}

export function createHostFencing (deps: AgentCallDependencies): HostFencingActivities {
  const { pool, client: agentClient } = deps
  return {
    /**
     * Marks the host and its live VMMs lost, and tells every instance that had one except
     * `byInstanceId` (whose execution asked and takes the answer). Returns the VMMs its loss
     * fenced. Safe to retry (module comment).
     */
    async declareHostLost (hostId, byInstanceId) {
      const lost = await inTransaction(pool, async (tx) => await markHostLost(tx, hostId, 'operator', OPERATOR_REASON))
      await tellLost(lost.filter((v) => v.instanceId !== byInstanceId))
      return lost
    },

    /** Destroys, through the returned agent, every lost VMM of the host not yet fenced. */
    async fenceLostVmms (hostId) {
      const unfenced = await unfencedLostVmmsOn(pool, hostId)
      for (const { id } of unfenced) {
        await onAgent(deps, hostId, (agentUrl) => agentClient.destroyVmm(agentUrl, id))
        await markVmmFenced(pool, id)
      }
      return unfenced.length
    },

    /** Brings a lost host back to `active`, but only once none of its lost VMMs is unfenced. */
    async readmitHost (hostId) {
      return await readmitFencedHost(pool, hostId)
    },

    /** Brings back a host its lease declared lost, once heard again with none of its lost VMMs unfenced. */
    async readmitHostLostByLease (hostId) {
      return await readmitFencedHost(pool, hostId, 'lease')
    }
  }
}
