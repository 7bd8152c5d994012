/**
 * Hosts' leases, as each host's monitor judges them (docs/design.md §17; the rules in
 * domain/host-lease.ts; the grants are the API's, api/services/host-lease-renewals.ts).
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
import { leaseFactsOf, leaseRecordOf, type LeaseFactsRows } from '../db/hosts.js'
import { inTransaction, type Pool } from '../db/pool.js'
import { leaseVerdict, type LeaseSettings } from '../domain/host-lease.js'
import { markHostLost, tellLost } from './host-fencing.js'

export interface HostLeaseDependencies {
  pool: Pool
  lease: LeaseSettings
}

/**
 * The settings a judgement counts by: the longest term of the worker's own and of every grant it
 * reads, should an API be configured with a longer one than this worker (never early, whichever
 * granted).
 */
function withLongestTerm (settings: LeaseSettings, facts: LeaseFactsRows): LeaseSettings {
  const terms = [facts.host, ...facts.peers].map((row) => row.termMs ?? 0)
  return { ...settings, termMs: Math.max(settings.termMs, ...terms) }
}

export function createHostLeases (deps: HostLeaseDependencies): HostLeaseActivities {
  const { pool, lease: settings } = deps
  return {
    async judgeHostLease (hostId) {
      const judged = await inTransaction(pool, async (tx) => {
        const facts = await leaseFactsOf(tx, hostId)
        if (facts === null || facts.host.status === 'lost' || facts.host.watchdogMs === null) return { fenced: null, judgeAgainInMs: null }
        if (facts.host.watchdogMs > settings.watchdogMs) {
          log.warn('the host pets a watchdog slower than the control plane counts on: it is never declared lost by its lease', { hostId, watchdogMs: facts.host.watchdogMs, countedOnMs: settings.watchdogMs })
          return { fenced: null, judgeAgainInMs: null }
        }
        const verdict = leaseVerdict({ now: facts.host.now, upSince: facts.upSince, host: leaseRecordOf(facts.host), peers: facts.peers.map((peer) => ({ ...leaseRecordOf(peer), registeredAt: peer.registeredAt })) }, withLongestTerm(settings, facts))
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
