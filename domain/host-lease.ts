/**
 * A host's lease and the rules that make a silent host safe to recover from: the pure half of the
 * control plane's lease records (activities/host-leases.ts) and of the agent's lease keeper
 * (host-agent/lease/). docs/design.md §17 has the argument, case by case, and the timing diagram.
 *
 * - The control plane grants a host its lease in answer to a renewal; the agent counts the term
 *   from when it sent that renewal, on its own clock, and takes a grant only if it comes within
 *   `grantMaxAgeMs` of the send. So the agent's lease never outlasts the control plane's record
 *   of it, and the agent's acknowledgement (named in its next renewal) tells the control plane the
 *   agent holds it at least until `coveredForMs` after the grant.
 * - The agent pets its host's watchdog only while it holds its lease, or while a majority of its
 *   peers answer that they do not hold theirs either (the control plane is down, not this host).
 *   A watchdog not petted for `watchdogMs` kills every VMM of the host within `fenceMs`.
 * - The control plane takes a host as fenced once `declareAfterMs` has passed since its last
 *   grant, counted from its own recovery if it was down since, and only while a majority of the
 *   other hosts held their leases without a break over the last `peerWindowMs`: then no majority
 *   can have vouched for an outage in time to keep the host's watchdog from firing.
 *
 * Every bound allows for clocks that run at different rates: a duration measured on one clock is
 * within a factor `1 ± clockRate` of the real one.
 */

export interface LeaseSettings {
  /** How long a grant holds, from the agent's renewal that asked for it. */
  termMs: number
  /** The oldest renewal whose grant the agent still takes. */
  grantMaxAgeMs: number
  /** How long the host's watchdog waits for a pet before it fences the host. */
  watchdogMs: number
  /** How long a firing watchdog takes to have every VMM of the host dead. */
  fenceMs: number
  /** How long the agent waits for its peers' answers. */
  peerAskMs: number
  /** The largest rate difference between any clock and real time (0.01: 1 %). */
  clockRate: number
}

export const DEFAULT_LEASE_SETTINGS: LeaseSettings = {
  termMs: 12_000,
  grantMaxAgeMs: 4_000,
  watchdogMs: 5_000,
  fenceMs: 1_000,
  peerAskMs: 1_000,
  clockRate: 0.01
}

/** A duration measured on one clock that is at least `ms` of real time on any other. */
function atLeast (ms: number, { clockRate }: LeaseSettings): number {
  return Math.ceil(ms * (1 + clockRate) / (1 - clockRate))
}

/**
 * How long after its last grant (on the control plane's clock) a silent host is surely fenced:
 * the agent's lease ends within the term of the grant, its last pet comes before that, and its
 * watchdog fires and kills within `watchdogMs + fenceMs` of it.
 */
export function declareAfterMs (settings: LeaseSettings): number {
  return atLeast(settings.termMs + settings.watchdogMs + settings.fenceMs, settings)
}

/**
 * How far back a peer must have held its lease without a break to count against a vouch that
 * could still keep a host's watchdog from firing now: a pet on a majority's answers fences
 * within `watchdogMs + fenceMs`, the answers may be `peerAskMs` older than the pet, and a peer
 * answers that it holds its lease only once it has held it a term without a break (`answersHolding`).
 */
export function peerWindowMs (settings: LeaseSettings): number {
  return atLeast(settings.termMs + settings.watchdogMs + settings.fenceMs + settings.peerAskMs, settings)
}

/**
 * What an agent answers a peer that asks whether it holds its lease: yes only once it has held it
 * for a term without a break. Right after the control plane comes back, hosts renew one after
 * another; one slower than its peers is then still vouched for, not fenced for being slow.
 */
export function answersHolding (heldForMs: number | null, termMs: number): boolean {
  return heldForMs !== null && heldForMs >= termMs
}

/**
 * For how long after a grant's issue (on the control plane's clock) an agent that acknowledged it
 * surely still holds its lease: the renewal that asked was sent at most `grantMaxAgeMs` before
 * the agent took the grant, and the term runs from that send.
 */
export function coveredForMs (settings: LeaseSettings): number {
  const { termMs, grantMaxAgeMs, clockRate } = settings
  return Math.floor(termMs * (1 - clockRate) / (1 + clockRate) - grantMaxAgeMs)
}

/** With no grant to anyone for this long, the control plane was down: every lease starts again. */
export function outageGapMs (settings: LeaseSettings): number {
  return Math.floor(settings.termMs / 2)
}

/** A host's lease as the control plane records it (epoch ms on its clock). */
export interface LeaseRecord {
  /** The last grant issued, acknowledged or not. */
  grantedAt: number | null
  /** The last grant the agent acknowledged taking. */
  ackedGrantAt: number | null
  /** Since when the agent has held its lease without a break, as its acknowledgements show. */
  heldSince: number | null
  /** Until when the agent surely holds it. */
  holdsUntil: number | null
}

/** The record after the agent acknowledged a grant issued at `grantedAt`, at `ackedAt`. */
export function acknowledged (record: LeaseRecord, grantedAt: number, ackedAt: number, settings: LeaseSettings): LeaseRecord {
  const broken = record.holdsUntil === null || record.heldSince === null || ackedAt > record.holdsUntil
  return {
    grantedAt: Math.max(record.grantedAt ?? grantedAt, grantedAt),
    ackedGrantAt: Math.max(record.ackedGrantAt ?? grantedAt, grantedAt),
    heldSince: broken ? ackedAt : record.heldSince,
    holdsUntil: Math.max(record.holdsUntil ?? 0, grantedAt + coveredForMs(settings))
  }
}

/** Whether the peer surely held its lease over the whole of the last `peerWindowMs`. */
function heldThroughWindow (peer: LeaseRecord, now: number, settings: LeaseSettings): boolean {
  return peer.heldSince !== null && peer.holdsUntil !== null &&
    peer.heldSince <= now - peerWindowMs(settings) && peer.holdsUntil >= now
}

export interface LeaseFacts {
  now: number
  /** Since when the control plane has been up: its first grant after an outage. */
  upSince: number
  host: LeaseRecord
  /** The other hosts registered before the host's last grant, with when each was. */
  peers: Array<LeaseRecord & { registeredAt: number }>
}

export type LeaseVerdict =
  | { lost: true, lapsedAt: number }
  | { lost: false, reason: 'held' | 'peers-not-holding' | 'never-granted', recheckAt: number | null }

/**
 * Whether the control plane may take the host as fenced now, and if not, when to ask again
 * (null: only once it has a grant).
 */
export function leaseVerdict ({ now, upSince, host, peers }: LeaseFacts, settings: LeaseSettings): LeaseVerdict {
  if (host.grantedAt === null) return { lost: false, reason: 'never-granted', recheckAt: null }
  const lapsedAt = Math.max(host.grantedAt, upSince) + declareAfterMs(settings)
  if (now < lapsedAt) return { lost: false, reason: 'held', recheckAt: lapsedAt }
  const holding = new Set(peers.filter((peer) => heldThroughWindow(peer, now, settings)))
  const majorityHolds = peerSetsTheAgentMayHold(host, peers).every((set) => set.filter((peer) => holding.has(peer)).length * 2 > set.length)
  if (majorityHolds) return { lost: true, lapsedAt }
  return { lost: false, reason: 'peers-not-holding', recheckAt: now + Math.ceil(settings.termMs / 4) }
}

/**
 * The lists of peers the agent may be asking from: the list of any grant from the last it
 * acknowledged to the last issued (it may have taken one whose answer was lost), each every host
 * registered before that grant. A vouch and a declaration must count over the same list for two
 * majorities to share a peer, so the control plane needs a majority holding in each. Without an
 * acknowledged grant, the agent's list may be any, the empty one too, which no majority holds.
 */
function peerSetsTheAgentMayHold<P extends { registeredAt: number }> (host: LeaseRecord, peers: P[]): P[][] {
  const from = host.ackedGrantAt ?? -Infinity
  const cuts = [from, ...peers.map((peer) => peer.registeredAt).filter((at) => at > from)]
  return cuts.map((cut) => peers.filter((peer) => peer.registeredAt <= cut))
}

/**
 * A host's lease as people see it (`GET /v1/hosts`): `none` (its agent keeps no lease), `held`
 * (surely held now), `expiring` (not surely held, its bound not passed: a partition that heals now
 * changes nothing; a host not yet granted one shows this too), `expired` (the bound has passed:
 * the host is fenced unless a majority of its peers vouched for an outage of the control plane,
 * and is declared lost once its peers are seen holding theirs), `fenced` (declared lost by its
 * lease).
 */
export const LEASE_STATES = ['none', 'held', 'expiring', 'expired', 'fenced'] as const
export type LeaseState = (typeof LEASE_STATES)[number]

export function leaseStateOf (
  host: { now: number, keepsLease: boolean, grantedAt: number | null, holdsUntil: number | null, lostByLease: boolean },
  settings: LeaseSettings
): { state: LeaseState, fencedBy: number | null } {
  if (!host.keepsLease && !host.lostByLease) return { state: 'none', fencedBy: null }
  if (host.grantedAt === null) return { state: 'expiring', fencedBy: null }
  const fencedBy = host.grantedAt + declareAfterMs(settings)
  if (host.lostByLease) return { state: 'fenced', fencedBy }
  if (host.holdsUntil !== null && host.now <= host.holdsUntil) return { state: 'held', fencedBy: null }
  return { state: host.now < fencedBy ? 'expiring' : 'expired', fencedBy }
}

/** One peer's answer to "do you hold your lease?": true, false, or no answer in time (null). */
export type PeerAnswer = boolean | null

/**
 * What an agent whose lease has lapsed does: keep petting its watchdog only when a majority of
 * all its peers answered that they do not hold theirs either; a host that reaches no peer, or
 * whose peers hold theirs, lets its watchdog fence it. A host whose last grant named no peer at all
 * keeps petting: no majority can hold against it, so it is never declared lost by its lease, and
 * fencing it would only stop its VMs for nothing.
 */
export function outageVouched (answers: readonly PeerAnswer[]): boolean {
  if (answers.length === 0) return true
  return answers.filter((answer) => answer === false).length * 2 > answers.length
}
