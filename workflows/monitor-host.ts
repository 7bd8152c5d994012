/**
 * One long-running workflow per host (`host-<id>`), fed by its agent's heartbeats.
 *
 * Every heartbeat is recorded: the first registers the host, later ones keep its address and
 * capacity current and bring an `unreachable` host back to `active`. A host silent for longer
 * than the unreachable threshold is marked `unreachable`, from the moment it was last heard. That
 * is all losing contact does: it never touches its instances' state (I2).
 *
 * Every heartbeat not yet recorded is taken, the one that started the monitor (its agent's
 * signalWithStart) and those heard while another was being recorded included; a later one
 * carries the latest announcement, so one record serves all that came meanwhile.
 *
 * A host an operator declared lost stays lost; while it is, each heartbeat makes its agent destroy
 * the VMMs that were fenced (I6), and `readmitHost` takes it back once none is left. A host its
 * lease declared lost fenced itself: it is taken back as soon as it is heard again with none left.
 *
 * The host's lease (docs/design.md §17, activities/host-leases.ts), which its agent renews from
 * the API, not through this workflow: once a heartbeat says the host keeps one, the lease is
 * judged when its bound (`declareAfterMs`) could first have passed, and then whenever the last
 * judgement said to look again (for a held lease, the bound from its latest grant). The judgement
 * declares the host lost when the rule allows, heartbeats or not. The wait for a heartbeat ends at
 * the unreachable threshold or the judgement, whichever comes first, each counted from when it was
 * set (patch `host-leases`).
 *
 * The history is kept short by continuing as new every 200 events (about four minutes of
 * heartbeats): a worker that loses the execution from its cache replays the whole history, and a
 * replay of 2,000 events took longer than the 3 s workflow task timeout on a busy worker, so the
 * task timed out, the retry replayed again, and four monitors kept a worker saturated (found by
 * the performance benchmark, 800 running instances).
 */
import { condition, continueAsNew, patched, setHandler, workflowInfo } from '@temporalio/workflow'
import { declareHostLostSignal, hostHeartbeatSignal, readmitHostSignal } from '../contract/messages.js'
import type { MonitorHostInput } from '../contract/workflows.js'
import type { HostAnnouncement } from '../domain/host.js'
import { declareAfterMs } from '../domain/host-lease.js'
import { agents, reads, records } from './activity-proxies.js'
import { recordHostDeclaredLost } from './metrics.js'
import { HEARTBEATS_NOT_SKIPPED_PATCH, HOST_LEASES_PATCH } from './patches.js'

const HISTORY_LIMIT = 200

export async function monitorHost (input: MonitorHostInput): Promise<void> {
  const { hostUnreachableAfterMs, lease } = await reads.operationSettings()
  let latest = input.lastAnnouncement
  let heardAt = 0
  // An operator's action that arrived while the previous run was continuing as new is carried
  // over, not dropped.
  let operatorAction: 'lost' | 'readmit' | null = input.operatorAction ?? null
  setHandler(hostHeartbeatSignal, (announcement) => {
    latest = announcement
    heardAt = Date.now()
  })
  setHandler(declareHostLostSignal, () => { operatorAction = 'lost' })
  setHandler(readmitHostSignal, () => { operatorAction = 'readmit' })

  let reachable = true
  /** When the last heartbeat this run recorded was heard; the loop waits for a later one. */
  let recorded = 0
  /** When the host is to be marked unreachable if still silent, and when its lease is to be judged (workflow time). */
  let unreachableAt = Date.now() + hostUnreachableAfterMs
  let judgeLeaseAt = input.judgeLeaseAt ?? null
  while (!workflowInfo().continueAsNewSuggested && workflowInfo().historyLength < HISTORY_LIMIT) {
    const heard = patched(HEARTBEATS_NOT_SKIPPED_PATCH) ? recorded : heardAt
    const wake = (): boolean => heardAt !== heard || operatorAction !== null
    const leases = patched(HOST_LEASES_PATCH)
    // A reachable host has until the threshold to be heard; an unreachable one, forever; a lease
    // to judge, until its judgement.
    const waitMs = leases ? untilFirst(reachable ? unreachableAt : null, judgeLeaseAt) : reachable ? hostUnreachableAfterMs : null
    const woken = operatorAction !== null || (waitMs === null ? await condition(wake).then(() => true) : await condition(wake, waitMs))
    const action: 'lost' | 'readmit' | null = operatorAction
    operatorAction = null
    if (action === 'lost') {
      await agents.declareHostLost(input.hostId, null)
      recordHostDeclaredLost('operator')
    }
    if (action === 'readmit') await records.readmitHost(input.hostId)
    // A judgement that has fallen due is made whatever woke the monitor: heartbeats that keep
    // coming (from an agent that reaches Temporal but not the API) never put it off.
    if (leases && judgeLeaseAt !== null && Date.now() >= judgeLeaseAt) {
      const { lost, judgeAgainInMs } = await records.judgeHostLease(input.hostId)
      if (lost) recordHostDeclaredLost('lease')
      judgeLeaseAt = judgeAgainInMs === null ? null : Date.now() + judgeAgainInMs
      if (!woken) continue
    }
    if (!woken) {
      reachable = false
      await records.markHostUnreachable(input.hostId, heard === 0 ? null : new Date(heard).toISOString())
      continue
    }
    const announcement = latest as HostAnnouncement | null
    if (heardAt === heard || announcement === null) continue
    recorded = heardAt
    reachable = true
    unreachableAt = Date.now() + hostUnreachableAfterMs
    if (await records.recordHostHeartbeat(announcement) === 'lost') {
      await agents.fenceLostVmms(input.hostId)
      if (leases) await records.readmitHostLostByLease(input.hostId)
    }
    if (leases && announcement.lease !== undefined && lease !== undefined && judgeLeaseAt === null) {
      // No grant can be older than this judgement counts from: judging from here is never early,
      // and the judgement says when to look again.
      judgeLeaseAt = Date.now() + declareAfterMs(lease)
    }
  }
  await continueAsNew<typeof monitorHost>({ hostId: input.hostId, lastAnnouncement: latest, operatorAction, judgeLeaseAt })
}

/** How long until the earlier of two moments (workflow time), never less than a millisecond; null for neither. */
function untilFirst (a: number | null, b: number | null): number | null {
  const first = Math.min(a ?? Infinity, b ?? Infinity)
  return first === Infinity ? null : Math.max(1, first - Date.now())
}
