/**
 * Hosts' leases as the control plane records and judges them (activities/host-leases.ts), against
 * a real PostgreSQL, an agent client double that takes or refuses grants, and a Temporal client
 * double that records the reports a declaration sends. The lease's settings are shrunk so that its
 * bound passes in a second; the rule itself is domain/host-lease.ts's, tested from tables.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { Client } from '@temporalio/client'
import { MockActivityEnvironment } from '@temporalio/testing'
import { createHostLeases } from '../../activities/host-leases.js'
import type { LeaseJudgement } from '../../contract/activities.js'
import { insertInstance } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import type { LeaseGrant } from '../../domain/host-agent-api.js'
import { coveredForMs, declareAfterMs, type LeaseSettings } from '../../domain/host-lease.js'
import type { VmmReport } from '../../domain/vmm.js'
import type { HostAgentClient } from '../../http/host-agent-client.js'
import { insertHost, startDatabase, type TestDatabase } from '../helpers/database.js'

const LEASE: LeaseSettings = { termMs: 600, grantMaxAgeMs: 100, watchdogMs: 200, fenceMs: 50, peerAskMs: 50, clockRate: 0.01 }

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

  /** The activities, with an agent that answers each grant as `takes` says, remembering what it was sent. */
  function leases (takes: (hostId: string) => boolean | Error = () => true, sent: LeaseGrant[] = []) {
    const client = {
      grantLease: async (agentUrl: string, grant: LeaseGrant) => {
        sent.push(grant)
        const answer = takes(new URL(agentUrl).hostname)
        if (answer instanceof Error) throw answer
        return answer
      }
    } as unknown as HostAgentClient
    const activities = createHostLeases({ pool: db.pool, client, unreachableAfterMs: 60_000, lease: LEASE })
    const env = new MockActivityEnvironment({ taskQueue: 'leases-test' }, { client: temporal })
    return {
      grant: async (hostId: string, seq = 1) => await env.run(async () => await activities.grantLease(hostId, { seq, watchdogMs: LEASE.watchdogMs })),
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

  /** Grants each host's lease every 100 ms for `ms`, as heartbeats answered in time would. */
  async function renewFor (hostIds: string[], ms: number, activities = leases()): Promise<void> {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
      for (const id of hostIds) await activities.grant(id)
    }
  }

  it('records each grant before it is sent, naming every other host as a peer, and from the agent\'s taking it, until when it surely holds', async () => {
    await host('lease-a')
    await host('lease-b')
    const sent: LeaseGrant[] = []
    assert.equal(await leases(() => true, sent).grant('lease-a', 7), true)
    assert.deepEqual({ ...sent[0], peers: sent[0]!.peers.filter((p) => p.hostId === 'lease-b') }, {
      seq: 7, termMs: LEASE.termMs, grantMaxAgeMs: LEASE.grantMaxAgeMs, peerAskMs: LEASE.peerAskMs, peers: [{ hostId: 'lease-b', agentUrl: 'http://lease-b:7301' }]
    })
    assert.ok(!sent[0]!.peers.some((p) => p.hostId === 'lease-a'), 'never itself')
    const row = await leaseRow('lease-a')
    assert.equal(row.lease_watchdog_ms, LEASE.watchdogMs)
    assert.ok(Math.abs(row.holds_until - row.granted - coveredForMs(LEASE)) < 1, `held until ${row.holds_until - row.granted} ms after the grant`)
    assert.ok(row.held_since >= row.granted)
  })

  it('records a grant its agent refused or never answered, and counts no holding from it', async () => {
    await host('lease-c')
    assert.equal(await leases(() => false).grant('lease-c'), false)
    assert.equal(await leases(() => new Error('connect ECONNREFUSED')).grant('lease-c'), false)
    const row = await leaseRow('lease-c')
    assert.notEqual(row.granted, null)
    assert.equal(row.holds_until, null)
  })

  it('declares a silent host lost once its bound has passed while its peers held theirs, with the reason, and tells each instance', async () => {
    for (const id of ['lease-d', 'lease-e', 'lease-f']) await host(id)
    const activities = leases()
    await activities.grant('lease-d')
    const vmms = [await runningOn('lease-d'), await runningOn('lease-d')]
    const early = await activities.judge('lease-d')
    assert.equal(early.lost, false)
    assert.ok(early.judgeAgainInMs !== null && early.judgeAgainInMs > 0 && early.judgeAgainInMs <= declareAfterMs(LEASE))
    // Every other host renews: the hosts of the tests before are its peers too.
    const { rows } = await db.pool.query("SELECT id FROM hosts WHERE id <> 'lease-d'")
    await renewFor(rows.map((r) => r.id), declareAfterMs(LEASE) + 200, activities)
    assert.deepEqual(await activities.judge('lease-d'), { lost: true, judgeAgainInMs: null })
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

  it('never judges a host whose agent keeps no lease', async () => {
    await host('lease-j')
    assert.deepEqual(await leases().judge('lease-j'), { lost: false, judgeAgainInMs: null })
  })
})
