/**
 * The agent's half of its host's lease (docs/design.md §17; the rules in domain/host-lease.ts).
 *
 * Each heartbeat asks for the lease under a sequence number, remembered with when it was sent on
 * this host's monotonic clock. The control plane answers with a grant for one of them; the term
 * runs from that send, and a grant that comes more than its `grantMaxAgeMs` after it is refused,
 * so the control plane never counts on a lease this agent does not hold.
 *
 * Every `petEveryMs` the keeper decides, and pets the host's watchdog only when allowed:
 * - holding its lease: pet;
 * - not holding it: ask every peer the last grant named whether it holds its own; a majority of
 *   all peers answering that they do not means the control plane is down, not this host: pet.
 *   Otherwise do not pet, and fence: every VMM of the host is killed at once, and no new one is
 *   made until the lease is held again. The watchdog would fence the host anyway within its
 *   bound; the agent fencing first makes it sooner, and leaves the VMMs' records saying why.
 *
 * An agent that just started holds no lease yet. It asks its peers like one that lost it, those its
 * predecessor's last grant named (an agent started during a control-plane outage must not let its
 * watchdog fence a healthy host), but
 * fences only once `startupGraceMs` has passed since it started without a grant: its first heartbeat is
 * normally answered well before, and a VMM adopted from its predecessor is not killed for the
 * restart. The watchdog, armed by the predecessor's pets, holds the bound meanwhile.
 */
import type { Logger } from 'pino'
import { outageVouched, type PeerAnswer } from '../../domain/host-lease.js'
import type { LeaseGrant, LeasePeer } from '../../domain/host-agent-api.js'

export interface LeaseKeeperSettings {
  petEveryMs: number
  /** How long a just-started agent waits for its first grant before it fences. */
  startupGraceMs: number
}

/** What the keeper acts through: the host's watchdog, its peers and its VMMs. */
export interface LeaseKeeperEffects {
  pet: () => void
  askPeer: (peer: LeasePeer, timeoutMs: number) => Promise<PeerAnswer>
  /** Kills every VMM of the host. */
  fence: (reason: string) => Promise<void>
  /** Keeps the peers a grant named, for a restarted agent to ask (host-agent/lease/peer-file.ts). */
  savePeers: (peers: LeasePeer[]) => void
}

/** How many heartbeats' send times are kept; a grant answers one of the latest. */
const REMEMBERED_REQUESTS = 16
/** How long peers are given to answer before the first grant says. */
const FIRST_PEER_ASK_MS = 1_000

export class LeaseKeeper {
  readonly #sentAt = new Map<number, number>()
  #nextSeq = 1
  /** Until when the lease holds, on `performance.now()`'s clock; null before any grant. */
  #holdsUntil: number | null = null
  #peers: LeasePeer[]
  #peerAskMs = FIRST_PEER_ASK_MS
  #fenced = false
  readonly #startedAt: number
  #timer: NodeJS.Timeout | null = null
  #deciding = false
  #vouchedLogged = false

  constructor (
    private readonly settings: LeaseKeeperSettings,
    private readonly effects: LeaseKeeperEffects,
    private readonly log: Logger,
    /** The peers the predecessor's last grant named. */
    peers: LeasePeer[],
    private readonly now: () => number = () => performance.now()
  ) {
    this.#startedAt = now()
    this.#peers = peers
  }

  /** A heartbeat's request for the lease: its sequence number, its send time remembered. */
  request (): number {
    const seq = this.#nextSeq++
    this.#sentAt.set(seq, this.now())
    this.#sentAt.delete(seq - REMEMBERED_REQUESTS)
    return seq
  }

  /** Takes a grant if it answers a heartbeat sent at most `grantMaxAgeMs` ago; whether it did. */
  take (grant: LeaseGrant): boolean {
    const sentAt = this.#sentAt.get(grant.seq)
    const now = this.now()
    if (sentAt === undefined || now - sentAt > grant.grantMaxAgeMs) return false
    this.#holdsUntil = Math.max(this.#holdsUntil ?? 0, sentAt + grant.termMs)
    this.#peerAskMs = grant.peerAskMs
    if (JSON.stringify(grant.peers) !== JSON.stringify(this.#peers)) this.effects.savePeers(grant.peers)
    this.#peers = grant.peers
    if (this.#fenced) this.log.info('lease held again: the host takes VMMs again')
    this.#fenced = false
    this.#vouchedLogged = false
    this.effects.pet()
    return true
  }

  holds (): boolean {
    return this.#holdsUntil !== null && this.now() < this.#holdsUntil
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
      if (this.holds()) {
        this.effects.pet()
        return
      }
      const answers = await Promise.all(this.#peers.map(async (peer) => await this.effects.askPeer(peer, this.#peerAskMs).catch(() => null)))
      if (outageVouched(answers)) {
        this.effects.pet()
        if (!this.#vouchedLogged) this.log.warn({ peers: this.#peers.length, vouching: answers.filter((a) => a === false).length }, 'lease lapsed, but a majority of peers cannot reach the control plane either: not fencing')
        this.#vouchedLogged = true
        return
      }
      await this.#fence(answers)
    } finally {
      this.#deciding = false
    }
  }

  async #fence (answers: PeerAnswer[]): Promise<void> {
    if (this.#holdsUntil === null && this.now() - this.#startedAt < this.settings.startupGraceMs) return
    if (this.#fenced) return
    this.#fenced = true
    const reason = `host lease lapsed and ${answers.filter((a) => a === true).length} of ${answers.length} peers hold theirs, ${answers.filter((a) => a === null).length} did not answer: host fenced`
    this.log.error(reason)
    await this.effects.fence(reason)
  }
}
