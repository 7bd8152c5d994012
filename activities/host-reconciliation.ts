/**
 * The reconciler's passes over one host and over the shared storage (reconciler.ts has the theory
 * of operation): read what is there, decide what to mend (domain/reconciliation.ts), and mend it
 * through the paths everything else uses, logging each action before it is taken. An action that
 * fails is counted and left for the next pass.
 */
import { activityInfo, getClient, log } from '@temporalio/activity'
import type { HostReconciliation, ReconcileCounts } from '../contract/activities.js'
import { reportDelivery, WORKFLOW_TYPES } from '../contract/workflows.js'
import { liveDiskIds, liveInstanceIds } from '../db/instances.js'
import { policiesOf } from '../db/firewall-rules.js'
import { knownVmmsOn } from '../db/vmms.js'
import type { StorageListing } from '../domain/host-agent-api.js'
import { hostMends, storageOrphans, type HostInventory, type HostMend, type PassClock } from '../domain/reconciliation.js'
import { concludedReport, isTerminalVmmState, type VmmReport } from '../domain/vmm.js'
import { onAgent, toReport, type AgentCallDependencies } from './host-agent-calls.js'

/** Actions listed per pass at most (the counts are complete). */
const MAX_ACTIONS = 100

export interface ReconcilerDependencies extends AgentCallDependencies {
  orphanGraceMs: number
}

/** Mends the differences between a host's VMMs, their firewall policies, processes, TAPs and segments and what PostgreSQL records. */
export async function reconcileHost (deps: ReconcilerDependencies, hostId: string): Promise<HostReconciliation> {
  const tally = new Tally(hostId)
  let found: HostInventory
  try {
    found = {
      vmms: await onAgent(deps, hostId, (url) => deps.client.listVmms(url)),
      strays: await onAgent(deps, hostId, (url) => deps.client.listStrays(url)),
      taps: await onAgent(deps, hostId, (url) => deps.client.listTaps(url)),
      segments: await onAgent(deps, hostId, (url) => deps.client.listSegments(url))
    }
  } catch {
    return tally.unreachable()
  }
  // PostgreSQL is read after the inventory: what the agent made in between is in PostgreSQL only.
  const known = await knownVmmsOn(deps.pool, hostId, found.vmms.map((v) => v.id))
  const policies = await policiesOf(deps.pool, [...new Set([...known.values()]
    .filter((row) => !isTerminalVmmState(row.vmm.state) && !row.instanceDestroyed).map((row) => row.vmm.instanceId))])
  for (const mend of hostMends(found, known, policies, passClock(deps))) await carryOut(deps, hostId, mend, tally)
  return tally.done()
}

async function carryOut (deps: ReconcilerDependencies, hostId: string, mend: HostMend, tally: Tally): Promise<void> {
  const agents = deps.client
  switch (mend.mend) {
    case 'orphan-waiting': return tally.count('orphansWaiting')
    case 'stray-waiting': return tally.count('straysWaiting')
    case 'report-waiting': return tally.count('reportsWaiting')
    case 'reap-orphan': {
      const { vmm, why } = mend
      return await tally.act('orphansReaped', `reaping orphan VMM ${vmm.id} of instance ${vmm.instanceId} on ${hostId}: ${why}`,
        { vmmId: vmm.id, instanceId: vmm.instanceId }, () => onAgent(deps, hostId, (url) => agents.destroyVmm(url, vmm.id)))
    }
    case 'resend-report': {
      const { vmm } = mend
      return await tally.act('reportsResent', `reporting VMM ${vmm.id} again: the agent is at generation ${vmm.generation}, PostgreSQL at ${mend.recordedGeneration}`,
        { vmmId: vmm.id, instanceId: vmm.instanceId }, () => report(toReport(vmm, hostId)))
    }
    case 'ask-if-gone': {
      const { vmm } = mend
      // Only the agent's answer about this VMM, now, says it is gone; no answer says nothing.
      const asked = await onAgent(deps, hostId, (url) => agents.findVmm(url, vmm.id)).catch(() => undefined)
      if (asked !== null) return
      return await tally.act('vmmsGone', `reporting VMM ${vmm.id} of instance ${vmm.instanceId} gone: ${hostId} has no record of it`,
        { vmmId: vmm.id, instanceId: vmm.instanceId }, () => report(concludedReport(vmm, 'destroyed', 'the host agent has no record of this VMM (found by the reconciler)', new Date().toISOString())))
    }
    case 'reap-stray': {
      const { stray } = mend
      return await tally.act('straysReaped', `reaping stray VMM process ${stray.pid} on ${hostId} (${stray.apiSocket}): no record owns it`,
        {}, () => onAgent(deps, hostId, (url) => agents.reapStray(url, stray)))
    }
    case 'remove-tap': {
      const { tap } = mend
      return await tally.act('tapsReaped', `removing TAP ${tap.name} on ${hostId}: no live VMM has it`,
        {}, () => onAgent(deps, hostId, (url) => agents.removeTap(url, tap.name)))
    }
    case 'remove-segment': {
      const { segment } = mend
      return await tally.act('segmentsReaped', `removing network segment ${segment.bridge} (VNI ${segment.vni}) on ${hostId}: no live VMM's TAP is on it`,
        {}, () => onAgent(deps, hostId, (url) => agents.removeSegment(url, segment.vni)))
    }
    case 'push-policy': {
      const { vmm, policy } = mend
      return await tally.act('policiesPushed', `sending VMM ${vmm.id} of instance ${vmm.instanceId} its firewall policy at generation ${policy.generation}: ${hostId} enforces another`,
        { vmmId: vmm.id, instanceId: vmm.instanceId }, () => onAgent(deps, hostId, (url) => agents.setPolicy(url, vmm.id, policy)))
    }
  }
}

/** Removes the shared storage's orphans, read through `hostId`'s agent. */
export async function reconcileStorage (deps: ReconcilerDependencies, hostId: string): Promise<HostReconciliation> {
  const tally = new Tally(hostId)
  let listing: StorageListing
  try {
    listing = await onAgent(deps, hostId, (url) => deps.client.listStorage(url))
  } catch {
    return tally.unreachable()
  }
  const live = {
    disks: await liveDiskIds(deps.pool, listing.disks.map((disk) => disk.diskId)),
    instances: await liveInstanceIds(deps.pool, listing.seeds.map((seed) => seed.instanceId))
  }
  const counted = { disks: 'disksReaped', seeds: 'seedsReaped', partial: 'partialFilesReaped' } as const
  for (const orphan of storageOrphans(listing, live, passClock(deps))) {
    if (orphan.waiting) {
      tally.count('storageWaiting')
      continue
    }
    await tally.act(counted[orphan.kind], `removing ${orphan.kind}/${orphan.name} from the storage: ${orphan.why}`,
      {}, () => onAgent(deps, hostId, (url) => deps.client.removeStored(url, orphan.kind, orphan.name)))
  }
  return tally.done()
}

function passClock (deps: ReconcilerDependencies): PassClock {
  return { now: Date.now(), graceMs: deps.orphanGraceMs }
}

async function report (vmmReport: VmmReport): Promise<void> {
  await getClient().workflow.signalWithStart(WORKFLOW_TYPES.reports, reportDelivery(vmmReport, activityInfo().taskQueue))
}

/** What one host's pass found and did: counts by kind, and the actions (at most MAX_ACTIONS). */
class Tally {
  readonly counts: ReconcileCounts = {}
  readonly actions: string[] = []

  constructor (readonly hostId: string) {}

  count (kind: string): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + 1
  }

  /** Does one thing, logged before it is done with what it is about; one that fails is counted. */
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
