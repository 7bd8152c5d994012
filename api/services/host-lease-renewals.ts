/**
 * A host's lease, renewed by its agent straight from the API (`PUT /v1/hosts/:id/lease`,
 * docs/design.md §17): a short transaction in PostgreSQL and nothing else, so that a saturated
 * Temporal or worker never holds a grant up long enough for a healthy host to fence itself. (Grants
 * used to travel through the host's monitor workflow; on a machine running 50 creates at once they
 * came later than an agent takes them.)
 *
 * Each renewal acknowledges the last grant the agent took, then is answered with a new grant. The
 * acknowledgement is recorded first: from it, the record says since when and until when the agent
 * surely holds its lease (`acknowledged`), which is what a judgement of its peers counts on. The
 * grant is recorded before it is answered: its time is the one every bound counts from, and the
 * control plane may only count on a lease it knows it granted. An answer that is lost costs
 * nothing: the agent asks again at its next renewal, and a grant it receives too late it refuses.
 */
import { leaseRecordOf, lockLease, recordLeaseGrant, setLeaseHeld } from '../../db/hosts.js'
import { inTransaction, type Pool } from '../../db/pool.js'
import type { LeaseGrant, LeaseRenewal } from '../../domain/host-lease-api.js'
import { acknowledged, outageGapMs, type LeaseSettings } from '../../domain/host-lease.js'

/** Renews the host's lease; null for a host not registered (its first heartbeat registers it). */
export async function renewHostLease (db: Pool, hostId: string, renewal: LeaseRenewal, settings: LeaseSettings): Promise<LeaseGrant | null> {
  return await inTransaction(db, async (tx) => {
    const row = await lockLease(tx, hostId)
    if (row === null) return null
    // Only a grant this control plane issued is acknowledged: none later than its last.
    if (renewal.took !== null && row.grantedAt !== null && renewal.took <= row.grantedAt) {
      const held = acknowledged(leaseRecordOf(row), renewal.took, row.now, settings)
      await setLeaseHeld(tx, hostId, { ackedGrantAt: held.ackedGrantAt!, heldSince: held.heldSince!, holdsUntil: held.holdsUntil! })
    }
    const grant = await recordLeaseGrant(tx, hostId, { watchdogMs: renewal.watchdogMs, termMs: settings.termMs, outageGapMs: outageGapMs(settings) })
    return { grantedAt: grant.grantedAt, termMs: settings.termMs, grantMaxAgeMs: settings.grantMaxAgeMs, peerAskMs: settings.peerAskMs, peers: grant.peers }
  })
}
