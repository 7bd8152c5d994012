/**
 * The migration storm (issue 25), the race storm's sibling (storm.test.ts). 12 instances on 3
 * hosts (every other one in a second project), each with a migration behaviour of its own on its kernel command line (docs/simulator.md):
 * 2 plain, 2 slow (about 4 s to send), one refused by the receiver at each of start, config,
 * memory, state and complete, 2 whose final acknowledgement is lost (`ack`: both sides resume),
 * and 1 that never converges (cancelled at the completion timeout, made 20 s here). For 2 minutes
 * 6 clients send random migrations (to a host placement picks, one they name, or one that does
 * not exist), cancels, starts, stops, deletes (to the 2 plain instances only), drains and
 * uncordons, while faults land at fixed moments of the storm:
 *
 * - the worker is SIGKILLed twice and each host agent once (the dev stack restarts them);
 * - the worker is frozen (SIGSTOP) past the 3 s workflow task timeout once, then thawed: the same
 *   process goes on;
 * - a host's network is cut (its LAN port down, helpers/partition.ts) while a slow migration from
 *   it is sending, and healed 10 s later;
 * - a host is declared lost (`declareHostLost` to its monitor, `host-<id>`) while a slow
 *   migration from it is sending: every VMM on it is fenced (none is live in PostgreSQL 15 s on),
 *   and its agent, heard from again at its next heartbeat, kills them; later it is readmitted as
 *   docs/operations.md says (`readmitHost`, sent again until the host is active), so the storm
 *   ends with 3 hosts.
 *
 * Every agent is sampled every 100 ms (helpers/guest-sampler.ts, which says what counts as a VMM
 * running the guest) from before the storm until the stack has settled after it. A host cut off
 * cannot be sampled (its reads are skipped, and counted): a double through the cut shows only in
 * part.
 *
 * At the end, once every host is uncordoned, all of these are 0, each checked on its own:
 * - answers other than 200, 202, 404, 409 (a conflict) and 422 (a target host that does not
 *   exist); a client records them and goes on, so that no surprise ends the storm with a host
 *   still cut off or the worker frozen;
 * - operations and drains not ended (I5);
 * - what `checkInvariants` finds: leaked reservations, orphan VMMs (processes and agent records),
 *   disks, TAPs and addresses, and instances off intent. Every instance has restart policy
 *   `on-failure`, so one failed by its host's loss (`HostLost`), or whose restart the disk lock of
 *   a fenced VMM not yet killed refused, starts again by itself: off intent is what the check calls
 *   it, a state other than the one intended (running, stopped, destroyed), or a running instance
 *   without exactly one process of its active VMM on its host, its TAPs and its disks. The failures
 *   met on the way are printed, by message;
 * - windows in which two VMMs of one instance both run the guest for longer than
 *   `DOUBLE_RUN_BOUND_MS` (500 ms: the bound is the source agent's reaction to its send's
 *   outcome, not the control plane's);
 * - nondeterminism in the worker's log, executions that do not replay, and exits of the worker or
 *   an agent other than the test's kills.
 *
 * It prints its figures: answers, requests accepted by kind, migrations by behaviour and outcome,
 * the kills, the sampler's samples, skipped reads and doubles (the longest, and each one over the
 * bound with its VMMs), and the time the stack took to settle.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { replayExecutions } from '../helpers/replay-executions.js'
import { waitFor } from '../../stack/wait.js'
import { settled, startFaultStack } from '../helpers/fault-stack.js'
import { DOUBLE_RUN_BOUND_MS, sampleGuests, type GuestSampler, type SamplerReport } from '../helpers/guest-sampler.js'
import { hostOf, newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { temporalCli } from '../helpers/operator.js'
import { cutHost, healHost } from '../helpers/partition.js'
import { ensureSecondProject, projectPathOf, type ProjectPair } from '../helpers/projects.js'
import { api, type ApiResponse, type TestStack } from '../helpers/stack.js'
import { temporalTrouble } from '../helpers/temporal-trouble.js'

/** About 4 s to send 256 MiB: long enough for a fault to land while it is sent. */
const SLOW = 'sim.migration_mib_per_s=64 sim.migration_dirty_mib_per_s=8'
/** Each instance's name and what its migrations do; the first two are the ones deletes go to. */
const BEHAVIOURS: Array<[string, string]> = [
  ['plain-1', ''],
  ['plain-2', ''],
  ['slow-1', SLOW],
  ['slow-2', SLOW],
  ['fail-at-start', 'sim.migration_fail_at=start'],
  ['fail-at-config', 'sim.migration_fail_at=config'],
  ['fail-at-memory', 'sim.migration_fail_at=memory'],
  ['fail-at-state', 'sim.migration_fail_at=state'],
  ['fail-at-complete', 'sim.migration_fail_at=complete'],
  ['lost-ack-1', 'sim.migration_fail_at=ack'],
  ['lost-ack-2', 'sim.migration_fail_at=ack'],
  ['no-converge', 'sim.migration_no_converge']
]
const DOOMED = 2
const SLOW_NAMES = ['slow-1', 'slow-2']

const CLIENTS = 6
const STORM_MS = 120_000
/** A client's pause between requests, on average: some 8 requests a second in all. */
const THINK_MS = 750
/** Longer than a workflow task's timeout (3 s). */
const FROZEN_MS = 5000
const CUT_MS = 10_000
/** How long a fault waits for a slow migration to be sending before it gives up. */
const IN_FLIGHT_TIMEOUT_MS = 45_000
/** After the storm, how long every operation and drain has to end. */
const END_TIMEOUT_MS = 180_000

const REQUESTS = ['migrate', 'cancel', 'start', 'stop', 'delete', 'drain', 'uncordon'] as const
type Request = (typeof REQUESTS)[number]
/** How often each request is picked (a delete only for the doomed instances). */
const WEIGHTS: Record<Request, number> = { migrate: 35, cancel: 15, start: 25, stop: 12, delete: 3, drain: 3, uncordon: 7 }
const EXPECTED_ANSWERS = [200, 202, 404, 409, 422]

interface Accepted { instance?: { id: string }, operation?: { id: string } | null }
type StormInstance = InstanceBody & { migration: { phase: string, source: { hostId: string }, target: { hostId: string } | null } | null }

describe('a migration storm: random migrations, cancels, stops, starts, deletes, drains and uncordons through kills, a freeze, a cut and a host lost', { timeout: 20 * 60_000 }, () => {
  let stack: TestStack
  let db: pg.Client
  let sampler: GuestSampler | null = null
  let sampled: SamplerReport | null = null
  const names = new Map<string, string>()
  /** Each instance's path, in its project. */
  const paths = new Map<string, string>()
  let projects: ProjectPair
  const kills: string[] = []
  let stormEndedAt = 0
  let cutHostId: string | null = null

  before(async () => {
    stack = await startFaultStack(3, {
      VMPLANE_HEARTBEAT_SECONDS: '1',
      VMPLANE_HOST_UNREACHABLE_SECONDS: '5',
      VMPLANE_REPORT_RETRY_MAX_SECONDS: '2',
      VMPLANE_RESTART_BACKOFF_SECONDS: '1',
      VMPLANE_RESTART_BACKOFF_MAX_SECONDS: '4',
      // The never-converging migration is cancelled within 20 s, and a stalled one within 30 s.
      VMPLANE_MIGRATION_SECONDS_PER_GIB: '20',
      VMPLANE_MIGRATION_PROGRESS_TIMEOUT_SECONDS: '30'
    })
    db = new pg.Client({ connectionString: stack.info.databaseUrl })
    await db.connect()
    projects = await ensureSecondProject(stack, 'storm-b', '10.79.0.0/16')
  })
  after(async () => {
    await sampler?.stop()
    if (cutHostId !== null) await healHost(stack, cutHostId)
    await db?.end()
    await stack?.stop()
  })

  const hostIds = (): string[] => stack.info.hosts.map((h) => h.id)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!
  const label = (instanceId: string): string => names.get(instanceId) ?? instanceId

  it('runs the storm, every answer one of 200, 202, 404, 409 and 422, and every fault landing', async () => {
    const ids = await Promise.all(BEHAVIOURS.map(async ([name, cmdline], i) => {
      const project = projectPathOf(projects, i)
      const created = await api(stack).post<Accepted>(`${project}/instances`, { ...newInstance(name, `console=ttyS0 ${cmdline}`), restartPolicy: 'on-failure' })
      assert.equal(created.status, 202, JSON.stringify(created.body))
      names.set(created.body.instance!.id, name)
      paths.set(created.body.instance!.id, `${project}/instances/${created.body.instance!.id}`)
      return created.body.instance!.id
    }))
    for (const [i, id] of ids.entries()) await waitForState(stack, id, 'running', 120_000, projectPathOf(projects, i))
    sampler = sampleGuests(stack)

    const answers = new Map<string, number>()
    const acceptedByKind = new Map<string, number>()
    const unexpected: string[] = []
    const begin = Date.now()
    const end = begin + STORM_MS
    const client = async (): Promise<void> => {
      while (Date.now() < end) {
        const index = Math.floor(Math.random() * ids.length)
        const request = pickRequest(index < DOOMED)
        const answer = await send(request, ids[index]!).catch((err: unknown) => ({ status: 0, body: { error: String(err) } as Accepted }))
        const tally = `${request} ${answer.status}`
        answers.set(tally, (answers.get(tally) ?? 0) + 1)
        if (!EXPECTED_ANSWERS.includes(answer.status)) unexpected.push(`${tally} for ${label(ids[index]!)}: ${JSON.stringify(answer.body)}`)
        if (answer.status === 202 && (answer.body.operation ?? null) !== null) acceptedByKind.set(request, (acceptedByKind.get(request) ?? 0) + 1)
        await sleep(THINK_MS * (0.5 + Math.random()))
      }
    }
    const slowIds = ids.filter((id) => SLOW_NAMES.includes(label(id)))
    const at = async (fraction: number): Promise<void> => { await sleep(Math.max(0, begin + fraction * STORM_MS - Date.now())) }
    const faults = async (): Promise<void> => {
      const [first, second, third] = hostIds()
      await at(0.08)
      await kill('worker')
      await at(0.16)
      await kill(`agent-${first!}`)
      await at(0.25)
      await cutDuringMigration(slowIds)
      await at(0.42)
      await freezeWorker()
      await at(0.5)
      const lost = await loseHostDuringMigration(slowIds)
      await at(0.6)
      await kill(`agent-${second!}`)
      await at(0.72)
      await readmit(lost)
      await at(0.8)
      await kill(`agent-${third!}`)
      await at(0.9)
      await kill('worker')
    }
    // The clients go on to the end whatever a fault meets, so the checks after this one find the storm over.
    const [faulted] = await Promise.allSettled([faults(), ...Array.from({ length: CLIENTS }, client)])
    stormEndedAt = Date.now()
    console.log(`storm of ${Math.round((stormEndedAt - begin) / 1000)} s; answers: ${JSON.stringify(Object.fromEntries([...answers].sort()))}`)
    console.log(`accepted by kind: ${JSON.stringify(Object.fromEntries([...acceptedByKind].sort()))}; kills: ${kills.join(', ')}`)
    if (faulted.status === 'rejected') throw faulted.reason
    assert.deepEqual(unexpected, [], 'answers other than 200, 202, 404, 409 and 422')
  })

  it('ends every operation and every drain once every host is uncordoned', async () => {
    for (const host of hostIds()) {
      const uncordoned = await api(stack).post(`/v1/hosts/${host}/uncordon`)
      assert.equal(uncordoned.status, 200, `uncordon ${host}: ${JSON.stringify(uncordoned.body)}\n${await temporalTrouble(stack)}`)
    }
    let open: unknown[] = []
    await waitFor('every operation and drain to end', async () => {
      const { rows } = await db.query(
        `SELECT o.kind, o.id::text, i.name FROM operations o JOIN instances i ON i.id = o.instance_id WHERE o.finished_at IS NULL
         UNION ALL SELECT 'drain', d.id::text, d.host_id FROM drains d WHERE d.finished_at IS NULL`
      )
      open = rows
      return rows.length === 0 ? true : null
    }, { timeoutMs: END_TIMEOUT_MS, intervalMs: 1000, detail: async () => `still open: ${JSON.stringify(open)}\n${await temporalTrouble(stack)}` })
  })

  it('holds every invariant: no leaked reservation, no orphan, every instance at its intent', async () => {
    const report = await settled(stack)
    console.log(`settled ${Math.round((Date.now() - stormEndedAt) / 1000)} s after the storm, ${report.instances} instances`)
    await printOutcomes()
  })

  it(`never runs one guest in two VMMs for longer than ${DOUBLE_RUN_BOUND_MS} ms`, async () => {
    sampled = await sampler!.stop()
    sampler = null
    const over = sampled.doubles.filter((d) => d.durationMs > DOUBLE_RUN_BOUND_MS)
    console.log(`sampled ${sampled.samples} moments (${sampled.skipped} agent reads skipped), ${sampled.doubles.length} double(s), the longest ${sampled.longestMs} ms, ${over.length} over ${DOUBLE_RUN_BOUND_MS} ms`)
    for (const d of over) console.log(`  ${label(d.instanceId)} (${d.instanceId}) for ${d.durationMs} ms from ${new Date(d.startedAt).toISOString()}: ${d.vmms.join('; ')}`)
    assert.deepEqual(over.map((d) => `${label(d.instanceId)} ${d.durationMs} ms`), [], `no instance ran twice for longer than ${DOUBLE_RUN_BOUND_MS} ms`)
  })

  it('logged no nondeterminism, replays every execution, and ended the worker and the agents only by the kills', async () => {
    const nondeterminism = (await stack.logLines('worker')).filter((line) => /Nondeterminism|TMPRL1100|out of order/.test(line))
    assert.deepEqual(nondeterminism, [], 'the worker logged no nondeterminism')
    const { replayed, failures } = await replayExecutions(stack.info)
    console.log(`replayed ${replayed} executions`)
    assert.deepEqual(failures, [], `of ${replayed} executions`)
    for (const component of ['worker', ...hostIds().map((h) => `agent-${h}`)]) {
      const exits = (await stack.exitsOf(component)).map((e) => e.note)
      assert.equal(exits.length, kills.filter((k) => k === component).length, `${component} ended only by the test's kills: ${exits.join('; ')}`)
    }
  })

  async function send (request: Request, id: string): Promise<ApiResponse<Accepted>> {
    const instance = paths.get(id)!
    const grace = Math.floor(Math.random() * 3)
    switch (request) {
      case 'migrate': return await api(stack).post(`${instance}/migrate`, migrateBody())
      case 'cancel': return await api(stack).post(`${instance}/migrate/cancel`)
      case 'start': return await api(stack).post(`${instance}/start`)
      case 'stop': return await api(stack).post(`${instance}/stop`, { graceSeconds: grace })
      case 'delete': return await api(stack).delete(`${instance}?graceSeconds=${grace}`)
      case 'drain': return await api(stack).post(`/v1/hosts/${pick(hostIds())}/drain`, { concurrency: 2 })
      case 'uncordon': return await api(stack).post(`/v1/hosts/${pick(hostIds())}/uncordon`)
    }
  }

  /** Half the time placement's choice; otherwise a host named, now and then one that does not exist. */
  function migrateBody (): { targetHostId?: string } {
    if (Math.random() < 0.5) return {}
    return { targetHostId: Math.random() < 0.1 ? 'host-nowhere' : pick(hostIds()) }
  }

  async function kill (component: string): Promise<void> {
    await stack.kill(component)
    kills.push(component)
    await stack.waitForRestart(component)
  }

  async function freezeWorker (): Promise<void> {
    const frozen = await stack.kill('worker', 'SIGSTOP')
    try {
      await sleep(FROZEN_MS)
    } finally {
      await stack.kill('worker', 'SIGCONT')
    }
    assert.equal(await stack.pid('worker'), frozen, 'the worker was frozen, not restarted')
  }

  /**
   * A migration of one of the slow instances while it is being sent: one a client asked for, or
   * else one asked for here (after a start, if the instance is not running).
   */
  async function slowMigrationSending (slowIds: string[]): Promise<{ instanceId: string, sourceHostId: string }> {
    return await waitFor('a slow migration to be sending', async () => {
      for (const id of slowIds) {
        const { body } = await api(stack).get<StormInstance>(paths.get(id)!)
        if (body.migration?.phase === 'sending') return { instanceId: id, sourceHostId: body.migration.source.hostId }
        if (body.operation !== null) continue
        if (body.state === 'running') await api(stack).post(`${paths.get(id)!}/migrate`)
        else if (body.state === 'stopped' || body.state === 'failed') await api(stack).post(`${paths.get(id)!}/start`)
      }
      return null
    }, { timeoutMs: IN_FLIGHT_TIMEOUT_MS, intervalMs: 200 })
  }

  async function cutDuringMigration (slowIds: string[]): Promise<void> {
    const { instanceId, sourceHostId } = await slowMigrationSending(slowIds)
    cutHostId = sourceHostId
    await cutHost(stack, sourceHostId, 'link-down')
    console.log(`cut ${sourceHostId} off while ${label(instanceId)} was sent from it`)
    try {
      await sleep(CUT_MS)
    } finally {
      await healHost(stack, sourceHostId)
    }
  }

  async function loseHostDuringMigration (slowIds: string[]): Promise<string> {
    const { instanceId, sourceHostId } = await slowMigrationSending(slowIds)
    await temporalCli(stack, 'workflow', 'signal', '-w', `host-${sourceHostId}`, '--name', 'declareHostLost', '--input', JSON.stringify({ hostId: sourceHostId }))
    console.log(`declared ${sourceHostId} lost while ${label(instanceId)} was sent from it`)
    await waitFor(`every VMM on ${sourceHostId} fenced`, async () => {
      const { rows } = await db.query("SELECT id FROM vmms WHERE host_id = $1 AND state NOT IN ('destroyed', 'failed', 'lost')", [sourceHostId])
      return rows.length === 0 ? true : null
    }, { timeoutMs: 15_000, intervalMs: 250 })
    return sourceHostId
  }

  /** As the runbook says: once its agent has killed what was fenced, `readmitHost` takes it back. */
  async function readmit (hostId: string): Promise<void> {
    await waitFor(`${hostId} readmitted`, async () => {
      if ((await hostOf(stack, hostId))?.status === 'active') return true
      await temporalCli(stack, 'workflow', 'signal', '-w', `host-${hostId}`, '--name', 'readmitHost')
      return null
    }, { timeoutMs: 60_000, intervalMs: 2000 })
  }

  /** Migrations by behaviour and outcome, operations failed by code, and the failures instances met, by message. */
  async function printOutcomes (): Promise<void> {
    const { rows: migrations } = await db.query(
      'SELECT i.name, m.phase, count(*)::int AS n FROM migrations m JOIN instances i ON i.id = m.instance_id GROUP BY i.name, m.phase ORDER BY i.name, m.phase'
    )
    const byName = new Map<string, string[]>()
    for (const row of migrations) byName.set(row.name, [...byName.get(row.name) ?? [], `${row.phase} ${row.n}`])
    console.log(`migrations: ${[...byName].map(([name, phases]) => `${name}: ${phases.join(', ')}`).join('; ')}`)
    const { rows: totals } = await db.query('SELECT phase, count(*)::int AS n FROM migrations GROUP BY phase ORDER BY phase')
    console.log(`migrations in all: ${totals.map((r) => `${r.phase} ${r.n}`).join(', ')}`)
    const { rows: errors } = await db.query(
      "SELECT kind, error->>'code' AS code, count(*)::int AS n FROM operations WHERE status = 'failed' GROUP BY 1, 2 ORDER BY 1, 2"
    )
    console.log(`operations failed: ${errors.map((r) => `${r.kind} ${r.code} ${r.n}`).join(', ')}`)
    // An instance failed where an event reads `failed` and the one before it did not.
    const { rows: failures } = await db.query(
      `SELECT regexp_replace(message, '; restarting in .*$', '') AS message, count(*)::int AS n FROM (
         SELECT message, state, lag(state) OVER (PARTITION BY instance_id ORDER BY seq) AS before FROM instance_events WHERE state IS NOT NULL
       ) e WHERE state = 'failed' AND before IS DISTINCT FROM 'failed' GROUP BY 1 ORDER BY 2 DESC`
    )
    console.log(`instances failed: ${failures.length === 0 ? 'never' : failures.map((r) => `${r.message} (${r.n})`).join('; ')}`)
  }
})

/** A request by its weight; a delete only for a doomed instance. */
function pickRequest (doomed: boolean): Request {
  const requests = REQUESTS.filter((r) => doomed || r !== 'delete')
  let roll = Math.random() * requests.reduce((sum, r) => sum + WEIGHTS[r], 0)
  for (const request of requests) {
    roll -= WEIGHTS[request]
    if (roll < 0) return request
  }
  return requests[requests.length - 1]!
}
