/**
 * The agent's lease keeper (host-agent/lease/lease-keeper.ts) on a clock of the test's: which
 * grants it takes, and when it pets its watchdog, asks its peers or fences its host.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import pino from 'pino'
import type { LeasePeer } from '../../../domain/host-agent-api.js'
import type { LeaseGrant } from '../../../domain/host-lease-api.js'
import type { PeerAnswer } from '../../../domain/host-lease.js'
import type { SavedLease } from '../../../host-agent/lease/lease-file.js'
import { LeaseKeeper } from '../../../host-agent/lease/lease-keeper.js'

const PEERS: LeasePeer[] = ['host-2', 'host-3', 'host-4'].map((hostId) => ({ hostId, agentUrl: `http://${hostId}.test:7301` }))

/** A keeper whose clock, peers' answers and effects the test holds. */
function keeper (options: { kept?: SavedLease, answers?: Record<string, PeerAnswer> } = {}) {
  const world = {
    now: 0,
    pets: 0,
    fences: [] as string[],
    asked: 0,
    saved: [] as SavedLease[],
    lapses: 0,
    answers: options.answers ?? {},
    /** What happens while the peers are being asked. */
    whileAsking: null as (() => void) | null
  }
  const lease = new LeaseKeeper(
    { petEveryMs: 1_000, startupGraceMs: 10_000 },
    {
      pet: () => { world.pets++ },
      askPeer: async (peer) => {
        world.asked++
        world.whileAsking?.()
        return world.answers[peer.hostId] ?? null
      },
      fence: async (reason) => { world.fences.push(reason) },
      save: (kept) => { world.saved.push(kept) },
      lapsed: () => { world.lapses++ }
    },
    pino({ level: 'silent' }),
    options.kept ?? null,
    () => world.now
  )
  return { lease, world }
}

function grant (peers: LeasePeer[] = PEERS): LeaseGrant {
  return { grantedAt: 1_764_400_000_000, termMs: 12_000, grantMaxAgeMs: 4_000, peerAskMs: 1_000, peers }
}

/** A keeper that took a grant naming these peers and whose term has since passed; pets counted from then. */
function lapsedKeeper (options: Parameters<typeof keeper>[0] = {}, peers: LeasePeer[] = PEERS) {
  const held = keeper(options)
  held.lease.take(grant(peers), held.lease.clock())
  held.world.now = 20_000
  held.world.pets = 0
  return held
}

describe('LeaseKeeper', () => {
  it('takes a grant for a renewal sent within its age, and holds the term from that send', async () => {
    const { lease, world } = keeper()
    const sentAt = lease.clock()
    world.now = 3_000
    assert.equal(lease.take(grant(), sentAt), true)
    assert.equal(lease.holds(), true)
    world.now = 11_999
    assert.equal(lease.holds(), true)
    world.now = 12_000
    assert.equal(lease.holds(), false, 'the term runs from the send, not from the grant')
    await lease.decide()
    assert.equal(world.lapses, 0, 'not held at any decision before: no lapse')
  })

  it('refuses a grant that comes too late', () => {
    const { lease, world } = keeper()
    const sentAt = lease.clock()
    world.now = 4_001
    assert.equal(lease.take(grant(), sentAt), false)
    assert.equal(lease.holds(), false)
  })

  it('never shortens the lease for a grant of an older renewal taken later', () => {
    const { lease, world } = keeper()
    const first = lease.clock()
    world.now = 1_000
    const second = lease.clock()
    lease.take(grant(), second)
    lease.take(grant(), first)
    world.now = 12_500
    assert.equal(lease.holds(), true)
  })

  it('pets as it takes a grant, and at each decision while it holds the lease, asking nobody', async () => {
    const { lease, world } = keeper()
    lease.take(grant(), lease.clock())
    assert.equal(world.pets, 1)
    await lease.decide()
    assert.deepEqual([world.pets, world.asked, world.fences.length], [2, 0, 0])
  })

  it('lapsed, with a majority of peers not holding theirs either (the control plane is down): pets, fences nothing', async () => {
    const { lease, world } = lapsedKeeper({ answers: { 'host-2': false, 'host-3': false, 'host-4': null } })
    await lease.decide()
    assert.deepEqual([world.pets, world.asked, world.fences.length], [1, 3, 0])
    assert.equal(lease.mayStartVmms(), false, 'no new VMM without a lease, outage or not')
  })

  it('lapsed, with its peers holding theirs (this host is the one cut off): fences once, and does not pet', async () => {
    const { lease, world } = lapsedKeeper({ answers: { 'host-2': true, 'host-3': true, 'host-4': false } })
    await lease.decide()
    await lease.decide()
    assert.equal(world.pets, 0)
    assert.equal(world.fences.length, 1)
    assert.match(world.fences[0]!, /lease lapsed and 2 of 3 peers hold theirs, 0 did not answer/)
  })

  it('lapsed, taking a grant while its peers are asked: holds its lease again, and fences nothing', async () => {
    const { lease, world } = lapsedKeeper({ answers: { 'host-2': true, 'host-3': true, 'host-4': true } })
    world.whileAsking = () => { lease.take(grant(), lease.clock()) }
    await lease.decide()
    assert.deepEqual([world.fences.length, lease.mayStartVmms()], [0, true])
  })

  it('lapsed, reaching no peer: fences', async () => {
    const { lease, world } = keeper()
    lease.take(grant(), lease.clock())
    await lease.decide()
    world.now = 20_000
    world.pets = 0
    await lease.decide()
    assert.deepEqual([world.pets, world.fences.length, world.lapses], [0, 1, 1])
  })

  it('takes new VMMs again once a grant comes after a fence', async () => {
    const { lease, world } = keeper()
    lease.take(grant(), lease.clock())
    world.now = 20_000
    await lease.decide()
    assert.equal(lease.mayStartVmms(), false)
    world.pets = 0
    lease.take(grant(), lease.clock())
    assert.equal(lease.mayStartVmms(), true)
    await lease.decide()
    assert.equal(world.pets, 2)
  })

  it('a grant that names no peer: the host is alone, never declared lost by its lease, and keeps petting once it lapses', async () => {
    const { lease, world } = lapsedKeeper({}, [])
    await lease.decide()
    assert.deepEqual([world.pets, world.asked, world.fences.length], [1, 0, 0])
  })

  it('restarted, holds the lease its predecessor kept until its term ends, then asks the peers that lease named', async () => {
    const { lease, world } = keeper({ kept: { heldSince: -20_000, holdsUntil: 5_000, termMs: 12_000, peers: PEERS }, answers: { 'host-2': true, 'host-3': true, 'host-4': true } })
    assert.equal(lease.holds(), true)
    await lease.decide()
    assert.deepEqual([world.pets, world.asked], [1, 0])
    world.now = 6_000
    await lease.decide()
    assert.deepEqual([world.pets, world.asked, world.fences.length], [1, 3, 1], 'its peers hold theirs: it fences, with no grace')
  })

  it('restarted during an outage its peers share: pets on their word', async () => {
    const { lease, world } = keeper({ kept: { heldSince: -20_000, holdsUntil: 0, termMs: 12_000, peers: PEERS }, answers: { 'host-2': false, 'host-3': false, 'host-4': false } })
    world.now = 30_000
    await lease.decide()
    assert.deepEqual([world.pets, world.fences.length], [1, 0])
  })

  it('with nothing kept, knows no peer to vouch for it: does not pet, and fences once its grace has passed without a grant', async () => {
    const { lease, world } = keeper()
    world.now = 9_999
    await lease.decide()
    assert.deepEqual([world.pets, world.asked, world.fences.length], [0, 0, 0])
    world.now = 10_000
    await lease.decide()
    assert.deepEqual([world.pets, world.fences.length], [0, 1])
  })

  it('keeps the lease and the peers its grant named at every grant, for a restarted agent', () => {
    const { lease, world } = keeper()
    world.now = 1_000
    lease.take(grant(), lease.clock())
    lease.take(grant(PEERS.slice(0, 2)), lease.clock())
    assert.deepEqual(world.saved, [{ heldSince: 1_000, holdsUntil: 13_000, termMs: 12_000, peers: PEERS }, { heldSince: 1_000, holdsUntil: 13_000, termMs: 12_000, peers: PEERS.slice(0, 2) }])
  })

  it('tells a peer it holds its lease only once it has held it a term without a break', () => {
    const { lease, world } = keeper()
    lease.take(grant(), lease.clock())
    assert.equal(lease.answersHolding(), false)
    for (let at = 2_000; at <= 12_000; at += 2_000) {
      world.now = at
      lease.take(grant(), lease.clock())
    }
    assert.equal(lease.answersHolding(), true)
    world.now = 30_000
    assert.equal(lease.answersHolding(), false, 'lapsed')
  })
})
