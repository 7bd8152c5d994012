/**
 * The lease rules (domain/host-lease.ts) from tables: the bounds, what an acknowledgement records,
 * when the control plane may take a silent host as fenced, and when an agent is vouched for.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  acknowledged, answersHolding, coveredForMs, declareAfterMs, DEFAULT_LEASE_SETTINGS as S, leaseStateOf, leaseVerdict, outageVouched, peerWindowMs,
  type LeaseRecord, type LeaseVerdict
} from '../../../domain/host-lease.js'

const NEVER: LeaseRecord = { grantedAt: null, ackedGrantAt: null, heldSince: null, holdsUntil: null }

/** A host that renewed every 2 s from `since` until `until`, each grant acknowledged at once; registered at `registeredAt`. */
function renewed (since: number, until: number, registeredAt = 0): LeaseRecord & { registeredAt: number } {
  let record = NEVER
  for (let at = since; at <= until; at += 2_000) record = acknowledged(record, at, at + 5, S)
  return { ...record, registeredAt }
}

describe('the lease bounds', () => {
  it('take the host as fenced only after the term, the watchdog and the kill, on the slowest clock', () => {
    assert.equal(declareAfterMs(S), 18_364)
    assert.ok(declareAfterMs(S) * (1 - S.clockRate) >= (S.termMs + S.watchdogMs + S.fenceMs) * (1 + S.clockRate) - 1)
  })

  it('count a peer against a vouch only once it has held a term, and over the time a pet on a vouch could still keep a watchdog from firing', () => {
    assert.equal(peerWindowMs(S), 19_384)
  })

  it('cover an acknowledged grant for less than its term by the oldest renewal whose grant the agent takes', () => {
    assert.equal(coveredForMs(S), 7_762)
    assert.ok(coveredForMs(S) > 2 * 2_000, 'two renewals may go missing without a break')
  })
})

describe('acknowledged', () => {
  it('starts holding at the first acknowledgement and extends it with each one in time', () => {
    const first = acknowledged(NEVER, 1_000, 1_050, S)
    assert.deepEqual(first, { grantedAt: 1_000, ackedGrantAt: 1_000, heldSince: 1_050, holdsUntil: 1_000 + coveredForMs(S) })
    const next = acknowledged(first, 3_000, 3_020, S)
    assert.deepEqual(next, { grantedAt: 3_000, ackedGrantAt: 3_000, heldSince: 1_050, holdsUntil: 3_000 + coveredForMs(S) })
  })

  it('starts again from an acknowledgement that comes after the lease surely held', () => {
    const first = acknowledged(NEVER, 1_000, 1_050, S)
    const late = 1_000 + coveredForMs(S) + 1
    assert.equal(acknowledged(first, late - 10, late, S).heldSince, late)
  })

  it('never moves back for an acknowledgement of an older grant arriving late', () => {
    const record = acknowledged(acknowledged(NEVER, 5_000, 5_010, S), 3_000, 5_020, S)
    assert.deepEqual([record.grantedAt, record.holdsUntil], [5_000, 5_000 + coveredForMs(S)])
  })
})

describe('leaseVerdict', () => {
  const lastGrant = 100_000
  const host = renewed(0, lastGrant)
  const lapsedAt = lastGrant + declareAfterMs(S)
  const cases: Array<{ name: string, now: number, upSince?: number, host?: LeaseRecord, peers: Array<LeaseRecord & { registeredAt: number }>, verdict: LeaseVerdict }> = [
    {
      name: 'a host cut off while its peers renew: held until the bound, then lost',
      now: lapsedAt - 1,
      peers: [renewed(0, lapsedAt), renewed(0, lapsedAt)],
      verdict: { lost: false, reason: 'held', recheckAt: lapsedAt }
    },
    {
      name: 'the same host at the bound: lost',
      now: lapsedAt,
      peers: [renewed(0, lapsedAt), renewed(0, lapsedAt)],
      verdict: { lost: true, lapsedAt }
    },
    {
      name: 'the control plane down with every host: no peer held through the window, nobody is lost',
      now: lapsedAt + 60_000,
      upSince: 0,
      peers: [renewed(0, lastGrant), renewed(0, lastGrant)],
      verdict: { lost: false, reason: 'peers-not-holding', recheckAt: lapsedAt + 60_000 + S.termMs / 4 }
    },
    {
      name: 'after the control plane\'s own outage, the lease runs again from its recovery',
      now: lapsedAt + 60_000,
      upSince: lapsedAt + 50_000,
      peers: [renewed(lapsedAt + 50_000, lapsedAt + 60_000)],
      verdict: { lost: false, reason: 'held', recheckAt: lapsedAt + 50_000 + declareAfterMs(S) }
    },
    {
      name: 'peers renewing again since just before now, after an outage, do not count yet',
      now: lapsedAt + 70_000,
      upSince: 0,
      peers: [renewed(lapsedAt + 66_000, lapsedAt + 70_000), renewed(lapsedAt + 66_000, lapsedAt + 70_000)],
      verdict: { lost: false, reason: 'peers-not-holding', recheckAt: lapsedAt + 70_000 + S.termMs / 4 }
    },
    {
      name: 'a minority of hosts cut together (2 of 5): the others hold, each cut host is lost',
      now: lapsedAt,
      peers: [renewed(0, lastGrant), renewed(0, lapsedAt), renewed(0, lapsedAt), renewed(0, lapsedAt)],
      verdict: { lost: true, lapsedAt }
    },
    {
      name: 'a majority cut together (3 of 5): only 2 of 4 peers hold, not a majority; nobody is declared',
      now: lapsedAt,
      peers: [renewed(0, lastGrant), renewed(0, lastGrant), renewed(0, lapsedAt), renewed(0, lapsedAt)],
      verdict: { lost: false, reason: 'peers-not-holding', recheckAt: lapsedAt + S.termMs / 4 }
    },
    {
      name: 'a host alone: no peer can hold, so it is never declared by itself',
      now: lapsedAt + 600_000,
      peers: [],
      verdict: { lost: false, reason: 'peers-not-holding', recheckAt: lapsedAt + 600_000 + S.termMs / 4 }
    },
    {
      name: 'peers registered after its last acknowledged grant: the agent may still be asking the older list, where no majority holds',
      now: lapsedAt + 2_000,
      host: { ...host, grantedAt: lastGrant + 2_000 },
      peers: [renewed(0, lastGrant), renewed(0, lapsedAt + 2_000, lastGrant + 1_000), renewed(0, lapsedAt + 2_000, lastGrant + 1_500)],
      verdict: { lost: false, reason: 'peers-not-holding', recheckAt: lapsedAt + 2_000 + S.termMs / 4 }
    },
    {
      name: 'the same, with a majority holding in every list the agent may hold',
      now: lapsedAt + 2_000,
      host: { ...host, grantedAt: lastGrant + 2_000 },
      peers: [renewed(0, lapsedAt + 2_000), renewed(0, lapsedAt + 2_000, lastGrant + 1_000), renewed(0, lapsedAt + 2_000, lastGrant + 1_500)],
      verdict: { lost: true, lapsedAt: lapsedAt + 2_000 }
    },
    {
      name: 'an agent that never acknowledged a grant may hold any list, the empty one too: never declared',
      now: lapsedAt,
      host: { ...NEVER, grantedAt: lastGrant },
      peers: [renewed(0, lapsedAt), renewed(0, lapsedAt)],
      verdict: { lost: false, reason: 'peers-not-holding', recheckAt: lapsedAt + S.termMs / 4 }
    },
    {
      name: 'a host never granted a lease: nothing to judge until it has one',
      now: lapsedAt,
      host: NEVER,
      peers: [renewed(0, lapsedAt)],
      verdict: { lost: false, reason: 'never-granted', recheckAt: null }
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(leaseVerdict({ now: c.now, upSince: c.upSince ?? 0, host: c.host ?? host, peers: c.peers }, S), c.verdict)
    })
  }

  it('never takes a host as lost while a majority of its peers could have vouched for it within the window', () => {
    // A peer whose lease broke at any moment of the window may have answered "not holding".
    for (let brokeAgo = 0; brokeAgo <= peerWindowMs(S); brokeAgo += 500) {
      const now = lapsedAt + 30_000
      const broken = renewed(now - brokeAgo + 1, now)
      const verdict = leaseVerdict({ now, upSince: 0, host, peers: [broken, broken, renewed(0, now)] }, S)
      assert.equal(verdict.lost, false, `a break ${brokeAgo} ms ago`)
    }
  })
})

describe('outageVouched', () => {
  const cases: Array<[string, Array<boolean | null>, boolean]> = [
    ['every peer lost the control plane too: an outage, no fence', [false, false, false], true],
    ['a majority of peers lost it', [false, false, true], true],
    ['half is not a majority', [false, true], false],
    ['peers that hold theirs: this host is the one cut off', [true, true, true], false],
    ['no peer answers: cut off from everything', [null, null, null], false],
    ['a silent peer counts against: a majority of all peers must answer', [false, null, null], false],
    ['no peers at all: a host alone is never declared lost by its lease, so it never fences for it', [], true]
  ]
  for (const [name, answers, vouched] of cases) {
    it(name, () => { assert.equal(outageVouched(answers), vouched) })
  }
})

describe('leaseStateOf', () => {
  const grantedAt = 100_000
  const fencedBy = grantedAt + declareAfterMs(S)
  const cases: Array<[string, { now: number, keepsLease: boolean, grantedAt: number | null, holdsUntil: number | null, lostByLease: boolean }, ReturnType<typeof leaseStateOf>]> = [
    ['an agent that keeps no lease', { now: grantedAt, keepsLease: false, grantedAt: null, holdsUntil: null, lostByLease: false }, { state: 'none', fencedBy: null }],
    ['an agent that keeps one, not granted yet', { now: grantedAt, keepsLease: true, grantedAt: null, holdsUntil: null, lostByLease: false }, { state: 'expiring', fencedBy: null }],
    ['surely held', { now: grantedAt + 1_000, keepsLease: true, grantedAt, holdsUntil: grantedAt + coveredForMs(S), lostByLease: false }, { state: 'held', fencedBy: null }],
    ['no longer surely held, its bound ahead', { now: grantedAt + coveredForMs(S) + 1, keepsLease: true, grantedAt, holdsUntil: grantedAt + coveredForMs(S), lostByLease: false }, { state: 'expiring', fencedBy }],
    ['granted but never acknowledged', { now: grantedAt + 10, keepsLease: true, grantedAt, holdsUntil: null, lostByLease: false }, { state: 'expiring', fencedBy }],
    ['an agent that stopped keeping one, its last grant still recorded', { now: fencedBy + 5_000, keepsLease: false, grantedAt, holdsUntil: grantedAt + coveredForMs(S), lostByLease: false }, { state: 'none', fencedBy: null }],
    ['past its bound: fenced unless its peers vouched', { now: fencedBy, keepsLease: true, grantedAt, holdsUntil: grantedAt + coveredForMs(S), lostByLease: false }, { state: 'expired', fencedBy }],
    ['declared lost by its lease', { now: fencedBy + 5_000, keepsLease: true, grantedAt, holdsUntil: grantedAt + coveredForMs(S), lostByLease: true }, { state: 'fenced', fencedBy }]
  ]
  for (const [name, host, expected] of cases) {
    it(name, () => { assert.deepEqual(leaseStateOf(host, S), expected) })
  }
})

describe('answersHolding', () => {
  it('says a host holds its lease only once it has held it a term without a break', () => {
    assert.equal(answersHolding(null, S.termMs), false)
    assert.equal(answersHolding(S.termMs - 1, S.termMs), false)
    assert.equal(answersHolding(S.termMs, S.termMs), true)
  })
})
