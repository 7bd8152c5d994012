/**
 * The agent's half of its host's lease (docs/design.md §17; the rules in domain/host-lease.ts).
 *
 * The agent renews its lease from the control plane's API (host-agent/lease/lease-renewal.ts); a
 * grant's term runs from when the renewal that asked for it was sent, on this host's monotonic
 * clock, and a grant that comes more than its `grantMaxAgeMs` after that send is refused, so the
 * control plane never counts on a lease this agent does not hold.
 *
 * A peer asking whether this host holds its lease is told yes only once it has held it a term
 * without a break (`answersHolding`): after the control plane's recovery, a host slower to renew
 * than its peers is still vouched for meanwhile.
 *
 * Every `petEveryMs` the keeper decides, and pets the host's watchdog only when allowed:
 * - holding its lease: pet;
 * - not holding it: ask every peer the last grant named whether it holds its own; a majority of
 *   all peers answering that they do not means the control plane is down, not this host: pet.
 *   Otherwise do not pet, and fence: every VMM of the host is killed at once, and no new one is
 *   made until the lease is held again. The watchdog would fence the host anyway within its
 *   bound; the agent fencing first makes it sooner, and leaves the VMMs' records saying why.
 *
 * A restarted agent holds the lease its predecessor held (host-agent/lease/lease-file.ts) until its
 * term ends, and asks the peers that lease named once it lapses: a restart (a crash, an upgrade)
 * neither fences the host nor counts as holding a lease nobody granted. An agent with no lease
 * kept knows no peers, so nobody vouches for it: it fences once `startupGraceMs` has passed since
 * it started without a grant, and its watchdog, armed by its first connection, holds the bound
 * meanwhile.
 */
import type { Logger } from 'pino'
import { answersHolding, DEFAULT_LEASE_SETTINGS, outageVouched, type PeerAnswer } from '../../domain/host-lease.js'
import type { LeasePeer } from '../../domain/host-agent-api.js'
import type { LeaseGrant } from '../../domain/host-lease-api.js'
import { monotonicMs, type SavedLease } from './lease-file.js'

export interface LeaseKeeperSettings {
  petEveryMs: number
  /** How long a just-started agent waits for its first grant before it fences. */
  startupGraceMs: number
}

/** What the keeper acts through: the host's watchdog, its peers and its VMMs. */
export interface LeaseKeeperEffects {
  pet: () => void
  /** The peer's answer; null for none in time. Never rejects. */
  askPeer: (peer: LeasePeer, timeoutMs: number) => Promise<PeerAnswer>
  /** Kills every VMM of the host. */
  fence: (reason: string) => Promise<void>
  /** Keeps the lease for a restarted agent (host-agent/lease/lease-file.ts). */
  save: (lease: SavedLease) => void
  /** The lease was held at the last decision and is not now. */
  lapsed: () => void
}

export class LeaseKeeper {
  /** Since when the lease has been held without a break, and until when it holds, on the host's monotonic clock; null before any grant. */
  #heldSince: number | null
  #holdsUntil: number | null
  #termMs: number | null
  /** The peers the last grant named; null while no grant says (then nobody vouches). */
  #peers: LeasePeer[] | null
  /** How long peers are given to answer: the default until a grant says. */
  #peerAskMs = DEFAULT_LEASE_SETTINGS.peerAskMs
  #fenced = false
  readonly #startedAt: number
  #timer: NodeJS.Timeout | null = null
  #deciding = false
  #vouchedLogged = false
  /** Whether the last decision found the lease held. */
  #heldAtLastDecision = false

  constructor (
    private readonly settings: LeaseKeeperSettings,
    private readonly effects: LeaseKeeperEffects,
    private readonly log: Logger,
    /** The lease a predecessor held, kept in the state directory. */
    kept: SavedLease | null,
    private readonly now: () => number = monotonicMs
  ) {
    this.#startedAt = now()
    this.#heldSince = kept?.heldSince ?? null
    this.#holdsUntil = kept?.holdsUntil ?? null
    this.#termMs = kept?.termMs ?? null
    this.#peers = kept?.peers ?? null
  }

  /** This host's monotonic clock now, in ms: when a renewal is sent. */
  clock (): number {
    return this.now()
  }

  /** Takes a grant if it answers a renewal sent (on `clock()`) at most `grantMaxAgeMs` ago; whether it did. */
  take (grant: LeaseGrant, sentAt: number): boolean {
    const now = this.now()
    if (now - sentAt > grant.grantMaxAgeMs) return false
    if (!this.holds()) this.#heldSince = now
    this.#holdsUntil = Math.max(this.#holdsUntil ?? 0, sentAt + grant.termMs)
    this.#termMs = grant.termMs
    this.#peerAskMs = grant.peerAskMs
    this.#peers = grant.peers
    this.effects.save({ heldSince: this.#heldSince!, holdsUntil: this.#holdsUntil, termMs: grant.termMs, peers: grant.peers })
    if (this.#fenced) this.log.info('lease held again: the host takes VMMs again')
    this.#fenced = false
    this.#vouchedLogged = false
    this.effects.pet()
    return true
  }

  holds (): boolean {
    return this.#holdsUntil !== null && this.now() < this.#holdsUntil
  }

  /** What it answers a peer that asks whether it holds its lease (`answersHolding`). */
  answersHolding (): boolean {
    const heldForMs = this.holds() && this.#heldSince !== null ? this.now() - this.#heldSince : null
    return this.#termMs !== null && answersHolding(heldForMs, this.#termMs)
  }

  /** Whether the host may make a new VMM: only while it holds its lease. */
  mayStartVmms (): boolean {
    return this.holds() && !this.#fenced
  }

  start (): void {
    this.#timer = setInterval(() => {
      this.decide().catch((err: unknown) => { this.log.error({ err }, 'lease decision failed') })
    }, this.settings.petEveryMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** One decision: pet, or ask the peers and pet or fence (module comment). */
  async decide (): Promise<void> {
    if (this.#deciding) return
    this.#deciding = true
    try {
      const held = this.holds()
      if (this.#heldAtLastDecision && !held) this.effects.lapsed()
      this.#heldAtLastDecision = held
      if (held) {
        this.effects.pet()
        return
      }
      const peers = this.#peers
      const answers = peers === null ? null : await Promise.all(peers.map(async (peer) => await this.effects.askPeer(peer, this.#peerAskMs)))
      if (answers !== null && outageVouched(answers)) {
        this.effects.pet()
        if (!this.#vouchedLogged) this.log.warn({ peers: answers.length, vouching: answers.filter((a) => a === false).length }, answers.length === 0 ? 'lease lapsed; this host has no peers, so it is never declared lost by its lease: not fencing' : 'lease lapsed, but a majority of peers cannot reach the control plane either: not fencing')
        this.#vouchedLogged = true
        return
      }
      await this.#fence(answers ?? [])
    } finally {
      this.#deciding = false
    }
  }

  async #fence (answers: PeerAnswer[]): Promise<void> {
    // A grant taken while the peers were asked ends the lapse: the host holds its lease again.
    if (this.holds()) return
    if (this.#holdsUntil === null && this.now() - this.#startedAt < this.settings.startupGraceMs) return
    if (this.#fenced) return
    this.#fenced = true
    const reason = `host lease lapsed and ${answers.filter((a) => a === true).length} of ${answers.length} peers hold theirs, ${answers.filter((a) => a === null).length} did not answer: host fenced`
    this.log.error(reason)
    await this.effects.fence(reason)
  }
}
