/**
 * Hosts' leases as the control plane records and judges them: renewed as the API renews them
 * (api/services/host-lease-renewals.ts) and judged as each host's monitor does
 * (activities/host-leases.ts), against a real PostgreSQL and a Temporal client double that records
 * the reports a declaration sends. The lease's settings are shrunk so that its bound passes in
 * 2.6 s, with room for a busy machine's pauses between renewals (its outage gap is a second); the
 * rule itself is domain/host-lease.ts's, tested from tables.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { Client } from '@temporalio/client'
import { MockActivityEnvironment } from '@temporalio/testing'
import { markHostLost } from '../../activities/host-fencing.js'
import { createHostLeases } from '../../activities/host-leases.js'
import { renewHostLease } from '../../api/services/host-lease-renewals.js'
import type { LeaseJudgement } from '../../contract/activities.js'
import { readmitFencedHost } from '../../db/hosts.js'
import { insertInstance } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import type { LeaseGrant } from '../../domain/host-lease-api.js'
import { coveredForMs, declareAfterMs, type LeaseSettings } from '../../domain/host-lease.js'
import type { VmmReport } from '../../domain/vmm.js'
import { insertHost, startDatabase, type TestDatabase } from '../helpers/database.js'

const LEASE: LeaseSettings = { termMs: 2_000, grantMaxAgeMs: 300, watchdogMs: 400, fenceMs: 100, peerAskMs: 100, clockRate: 0.01 }

const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

describe('host leases (activities)', () => {
  let db: TestDatabase
  before(async () => { db = await startDatabase() })
  after(async () => { await db?.stop() })

  const signalled: VmmReport[] = []
  const temporal = {
    withAbortSignal: async <T>(_signal: AbortSignal, call: () => Promise<T>) => await call(),
    workflow: {
      signalWithStart: async (_type: string, options: { signalArgs: [VmmReport] }) => {
        signalled.push(options.signalArgs[0])
        return { signaledRunId: 'run' }
      }
    }
  } as unknown as Client

  /**
   * Renewals as each host's agent sends them, each acknowledging the grant before it, and the
   * judgement as the host's monitor runs it.
   */
  function leases () {
    const took = new Map<string, number>()
    const activities = createHostLeases({ pool: db.pool, lease: LEASE })
    const env = new MockActivityEnvironment({ taskQueue: 'leases-test' }, { client: temporal })
    return {
      grant: async (hostId: string, acknowledge: number | null = took.get(hostId) ?? null): Promise<LeaseGrant> => {
        const grant = await renewHostLease(db.pool, hostId, { watchdogMs: LEASE.watchdogMs, took: acknowledge }, LEASE)
        assert.ok(grant !== null, `${hostId} is registered`)
        took.set(hostId, grant.grantedAt)
        return grant
      },
      judge: async (hostId: string): Promise<LeaseJudgement> => await env.run(async () => await activities.judgeHostLease(hostId))
    }
  }

  async function host (id: string): Promise<void> {
    await insertHost(db.pool, id)
    await db.pool.query('UPDATE hosts SET agent_url = $2 WHERE id = $1', [id, `http://${id}:7301`])
  }

  async function leaseRow (hostId: string) {
    const { rows } = await db.pool.query(`SELECT (extract(epoch FROM lease_granted_at) * 1000)::float8 AS granted, (extract(epoch FROM lease_held_since) * 1000)::float8 AS held_since,
      (extract(epoch FROM lease_holds_until) * 1000)::float8 AS holds_until, lease_watchdog_ms, status, lost_by, lost_reason FROM hosts WHERE id = $1`, [hostId])
    return rows[0]
  }

  async function runningOn (hostId: string): Promise<string> {
    const instanceId = randomUUID()
    const vmmId = randomUUID()
    await inTransaction(db.pool, async (tx) => await insertInstance(tx, instanceId, { name: `l-${instanceId.slice(0, 8)}`, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 30, restartPolicy: 'never', intendedState: 'running' }))
    await db.pool.query("INSERT INTO vmms (id, instance_id, host_id, state, generation) VALUES ($1, $2, $3, 'running', 2)", [vmmId, instanceId, hostId])
    await db.pool.query("UPDATE instances SET state = 'running', active_vmm_id = $1 WHERE id = $2", [vmmId, instanceId])
    return vmmId
  }

  /** Grants each host's lease every 100 ms for `ms`, as agents' renewals answered in time would. */
  async function renewFor (hostIds: string[], ms: number, activities = leases()): Promise<void> {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
      for (const id of hostIds) await activities.grant(id)
    }
  }

  it('records each grant before answering it, naming every other host as a peer, and from its acknowledgement, until when the agent surely holds it', async () => {
    await host('lease-a')
    await host('lease-b')
    const activities = leases()
    const first = await activities.grant('lease-a')
    assert.deepEqual({ ...first, grantedAt: 0, peers: first.peers.filter((p) => p.hostId === 'lease-b') }, {
      grantedAt: 0, termMs: LEASE.termMs, grantMaxAgeMs: LEASE.grantMaxAgeMs, peerAskMs: LEASE.peerAskMs, peers: [{ hostId: 'lease-b', agentUrl: 'http://lease-b:7301' }]
    })
    assert.ok(!first.peers.some((p) => p.hostId === 'lease-a'), 'never itself')
    assert.equal((await leaseRow('lease-a')).granted, first.grantedAt)
    assert.equal((await leaseRow('lease-a')).holds_until, null, 'not acknowledged yet')
    const second = await activities.grant('lease-a')
    const row = await leaseRow('lease-a')
    assert.equal(row.granted, second.grantedAt)
    assert.equal(row.lease_watchdog_ms, LEASE.watchdogMs)
    assert.ok(Math.abs(row.holds_until - first.grantedAt - coveredForMs(LEASE)) < 1, `held until ${row.holds_until - first.grantedAt} ms after the grant acknowledged`)
    assert.ok(row.held_since >= first.grantedAt)
  })

  it('counts no holding from a grant never acknowledged, nor from the acknowledgement of one it never made', async () => {
    await host('lease-c')
    const activities = leases()
    const grant = await activities.grant('lease-c', null)
    await activities.grant('lease-c', grant.grantedAt + 60_000)
    const row = await leaseRow('lease-c')
    assert.notEqual(row.granted, null)
    assert.equal(row.holds_until, null)
  })

  it('renews no lease of a host not registered', async () => {
    assert.equal(await renewHostLease(db.pool, 'lease-unknown', { watchdogMs: LEASE.watchdogMs, took: null }, LEASE), null)
  })

  it('declares a silent host lost once its bound has passed while its peers held theirs, with the reason, and tells each instance', async () => {
    for (const id of ['lease-d', 'lease-e', 'lease-f']) await host(id)
    const activities = leases()
    // Renewed twice: the second acknowledges the first. Without an acknowledged grant, the
    // peers the agent asks could be any (domain/host-lease.ts), and no majority holds against it.
    await activities.grant('lease-d')
    await activities.grant('lease-d')
    const vmms = [await runningOn('lease-d'), await runningOn('lease-d')]
    const early = await activities.judge('lease-d')
    assert.equal(early.lost, false)
    assert.ok(early.judgeAgainInMs !== null && early.judgeAgainInMs > 0 && early.judgeAgainInMs <= declareAfterMs(LEASE))
    // Every other host renews meanwhile, as agents do (the hosts of the tests before are its peers
    // too); judged again and again, it is declared once its bound has passed with them holding,
    // however slowly a busy machine runs the renewals.
    const { rows } = await db.pool.query("SELECT id FROM hosts WHERE id <> 'lease-d'")
    let judgement = early
    for (const deadline = Date.now() + 15_000; !judgement.lost && Date.now() < deadline;) {
      await renewFor(rows.map((r) => r.id), 100, activities)
      judgement = await activities.judge('lease-d')
    }
    assert.deepEqual(judgement, { lost: true, judgeAgainInMs: null })
    const row = await leaseRow('lease-d')
    assert.deepEqual([row.status, row.lost_by], ['lost', 'lease'])
    assert.match(row.lost_reason, /^lease lapsed: last granted \S+, the host surely fenced by \S+; VMM fenced$/)
    const told = signalled.filter((report) => vmms.includes(report.vmmId))
    assert.deepEqual(told.map((r) => r.vmmId).sort(), [...vmms].sort())
    for (const report of told) assert.match(report.reason ?? '', /^lease lapsed/)
    assert.deepEqual(await activities.judge('lease-d'), { lost: false, judgeAgainInMs: null }, 'a lost host is judged no more')
  })

  it('declares nobody while its peers hold no lease either (the control plane was down for all)', async () => {
    for (const id of ['lease-g', 'lease-h', 'lease-i']) await host(id)
    const activities = leases()
    for (const id of ['lease-g', 'lease-h', 'lease-i']) await activities.grant(id)
    await sleep(declareAfterMs(LEASE) + 100)
    const judgement = await activities.judge('lease-g')
    assert.equal(judgement.lost, false)
    assert.equal(judgement.judgeAgainInMs, LEASE.termMs / 4)
    assert.equal((await leaseRow('lease-g')).status, 'active')
  })

  it('counts by the longest term it knows of: an API granting a longer term than the worker\'s is never judged early', async () => {
    await host('lease-t')
    const longer: LeaseSettings = { ...LEASE, termMs: 2 * LEASE.termMs }
    const first = await renewHostLease(db.pool, 'lease-t', { watchdogMs: LEASE.watchdogMs, took: null }, longer)
    await renewHostLease(db.pool, 'lease-t', { watchdogMs: LEASE.watchdogMs, took: first!.grantedAt }, longer)
    const judgement = await leases().judge('lease-t')
    assert.equal(judgement.lost, false)
    assert.ok(judgement.judgeAgainInMs !== null && judgement.judgeAgainInMs > declareAfterMs(LEASE),
      `judged again in ${judgement.judgeAgainInMs} ms: by the worker's own term it would be ${declareAfterMs(LEASE)} ms at most, by the grant's ${declareAfterMs(longer)} ms`)
  })

  it('re-admits a host its lease declared only once it holds a lease again, and one an operator declared too only when an operator says', async () => {
    for (const id of ['lease-k', 'lease-l']) await host(id)
    const activities = leases()
    for (const id of ['lease-k', 'lease-l']) await activities.grant(id)
    await inTransaction(db.pool, async (tx) => await markHostLost(tx, 'lease-k', 'lease', 'lease lapsed (test)'))
    await inTransaction(db.pool, async (tx) => await markHostLost(tx, 'lease-l', 'lease', 'lease lapsed (test)'))
    assert.equal(await readmitFencedHost(db.pool, 'lease-k', 'lease'), false, 'heard again, but holding no lease')
    await activities.grant('lease-k')
    await activities.grant('lease-k')
    assert.equal(await readmitFencedHost(db.pool, 'lease-k', 'lease'), true, 'holding its lease again')
    // An operator declares lease-l lost after its lease did: it is the operator's to re-admit.
    await inTransaction(db.pool, async (tx) => await markHostLost(tx, 'lease-l', 'operator', 'declared by an operator (test)'))
    assert.deepEqual([(await leaseRow('lease-l')).lost_by, (await leaseRow('lease-l')).lost_reason], ['operator', 'declared by an operator (test)'])
    await activities.grant('lease-l')
    await activities.grant('lease-l')
    assert.equal(await readmitFencedHost(db.pool, 'lease-l', 'lease'), false)
    assert.equal(await readmitFencedHost(db.pool, 'lease-l'), true)
  })

  it('never judges a host whose agent keeps no lease', async () => {
    await host('lease-j')
    assert.deepEqual(await leases().judge('lease-j'), { lost: false, judgeAgainInMs: null })
  })
})
