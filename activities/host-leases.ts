/**
 * Hosts' leases, as each host's monitor grants and judges them (docs/design.md §17; the rules in
 * domain/host-lease.ts).
 *
 * A grant is recorded before it is sent: its time is the one every bound counts from, and the
 * control plane may only count on a lease it knows it granted. The agent's answer that it took the
 * grant is its acknowledgement, recorded after: from it, the record says since when and until
 * when the agent surely holds its lease. A grant that gets no answer is not retried: the next
 * heartbeat asks again, and a late grant would be refused anyway.
 *
 * A judgement reads, in one transaction with the host's row locked, the host's lease, the control
 * plane's uptime and its peers' leases, and declares the host lost when the rule says it is surely
 * fenced: the host and its live VMMs are marked lost in that transaction, with the reason
 * (`HostLost`), and each instance that had one is told after, as an operator's declaration would.
 * A host whose agent keeps no lease, or pets a watchdog slower than the control plane counts on,
 * is never declared lost by its lease: nothing says it fenced itself.
 */
import { log } from '@temporalio/activity'
import type { HostLeaseActivities } from '../contract/activities.js'
import { agentUrlOf, leaseFactsOf, lockLease, recordLeaseGrant, setLeaseHeld, type LeaseRow } from '../db/hosts.js'
import { inTransaction } from '../db/pool.js'
import { acknowledged, leaseVerdict, outageGapMs, type LeaseSettings } from '../domain/host-lease.js'
import type { AgentCallDependencies } from './host-agent-calls.js'
import { markHostLost, tellLost } from './host-fencing.js'

export interface HostLeaseDependencies extends AgentCallDependencies {
  lease: LeaseSettings
}

function record (row: LeaseRow) {
  return { grantedAt: row.grantedAt, ackedGrantAt: row.ackedGrantAt, heldSince: row.heldSince, holdsUntil: row.holdsUntil }
}

export function createHostLeases (deps: HostLeaseDependencies): HostLeaseActivities {
  const { pool, client, lease: settings } = deps
  return {
    async grantLease (hostId, request) {
      const grant = await inTransaction(pool, async (tx) => await recordLeaseGrant(tx, hostId, request.watchdogMs, outageGapMs(settings)))
      const agentUrl = await agentUrlOf(pool, hostId)
      if (agentUrl === null) return false
      const taken = await client.grantLease(agentUrl, {
        seq: request.seq,
        termMs: settings.termMs,
        grantMaxAgeMs: settings.grantMaxAgeMs,
        peerAskMs: settings.peerAskMs,
        peers: grant.peers
      }).catch((err: Error) => {
        log.warn('the host agent did not take its lease', { hostId, error: err.message })
        return false
      })
      if (!taken) return false
      await inTransaction(pool, async (tx) => {
        const row = await lockLease(tx, hostId)
        if (row === null) return
        const held = acknowledged(record(row), grant.grantedAt, row.now, settings)
        await setLeaseHeld(tx, hostId, { ackedGrantAt: held.ackedGrantAt!, heldSince: held.heldSince!, holdsUntil: held.holdsUntil! })
      })
      return true
    },

    async judgeHostLease (hostId) {
      const judged = await inTransaction(pool, async (tx) => {
        const facts = await leaseFactsOf(tx, hostId)
        if (facts === null || facts.host.status === 'lost' || facts.host.watchdogMs === null) return { fenced: null, judgeAgainInMs: null }
        if (facts.host.watchdogMs > settings.watchdogMs) {
          log.warn('the host pets a watchdog slower than the control plane counts on: it is never declared lost by its lease', { hostId, watchdogMs: facts.host.watchdogMs, countedOnMs: settings.watchdogMs })
          return { fenced: null, judgeAgainInMs: null }
        }
        const verdict = leaseVerdict({ now: facts.host.now, upSince: facts.upSince, host: record(facts.host), peers: facts.peers.map((peer) => ({ ...record(peer), registeredAt: peer.registeredAt })) }, settings)
        if (!verdict.lost) return { fenced: null, judgeAgainInMs: verdict.recheckAt === null ? null : Math.max(0, verdict.recheckAt - facts.host.now) }
        const reason = `lease lapsed: last granted ${new Date(facts.host.grantedAt!).toISOString()}, the host surely fenced by ${new Date(verdict.lapsedAt).toISOString()}; VMM fenced`
        return { fenced: await markHostLost(tx, hostId, 'lease', reason), judgeAgainInMs: null }
      })
      if (judged.fenced === null) return { lost: false, judgeAgainInMs: judged.judgeAgainInMs }
      log.warn('host declared lost: its lease lapsed while a majority of its peers held theirs', { hostId, vmms: judged.fenced.length })
      await tellLost(judged.fenced)
      return { lost: true, judgeAgainInMs: null }
    }
  }
}
