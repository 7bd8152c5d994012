/**
 * The storm: 8 clients send random start, stop, reboot and delete requests to 12 instances (every
 * other one in a second project), some 16 a second, while the worker is killed once and frozen three times for longer than a
 * workflow task's timeout. Conflicting requests preempt and queue behind one another, and
 * workflow tasks time out and run again under load: the weather in which an execution written
 * with position-keyed writes recorded a delete `succeeded` for an instance left `stopped`, left
 * stop operations `running` for good, and failed every later task with a nondeterminism error
 * (issue 14).
 *
 * Afterwards every accepted request has ended recorded (I5), every delete recorded `succeeded`
 * left its instance destroyed, the stack holds every invariant (test/helpers/invariants.ts),
 * the worker logged no nondeterminism, every execution replays, and the worker ended only by the
 * test's kill.
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import pg from 'pg'
import { checkInvariants, violationsOf, type InvariantReport } from '../helpers/invariants.js'
import { ensureSecondProject, projectPathOf, type ProjectPair } from '../helpers/projects.js'
import { replayExecutions } from '../helpers/replay-executions.js'
import { waitFor } from '../../stack/wait.js'
import { newInstance, waitForState } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const CLIENTS = 8
const INSTANCES = 12
/** Of the instances, those that deletes are sent to; the rest live through the whole storm. */
const DOOMED = 4
const STORM_MS = 90_000
/** A client's pause between requests, on average: some 16 requests a second in all, as the storm sent. */
const THINK_MS = 500
/** Freezes of the worker, each longer than a workflow task's timeout (3 s): the requests that arrive meanwhile wait on tasks that will time out. */
const FREEZES = 3
const FROZEN_MS = 5_000

type Request = 'start' | 'stop' | 'reboot' | 'delete'

interface Accepted { instance: { id: string }, operation: { id: string } | null }

describe('a storm of conflicting requests through a killed and thrice frozen worker', { timeout: 15 * 60_000 }, () => {
  let stack: TestStack
  let db: pg.Client
  let projects: ProjectPair
  before(async () => {
    stack = await startStack({ hosts: 2, env: { VMPLANE_HOST_VCPUS: '1024', VMPLANE_RECONCILE_SECONDS: '15', VMPLANE_ORPHAN_GRACE_SECONDS: '20' } })
    db = new pg.Client({ connectionString: stack.info.databaseUrl })
    await db.connect()
    projects = await ensureSecondProject(stack, 'storm-b', '10.79.0.0/16')
  })
  after(async () => {
    await db?.end()
    await stack?.stop()
  })

  it('ends every accepted request recorded as what happened, with no execution stuck', async () => {
    const ids = await Promise.all(Array.from({ length: INSTANCES }, async (_, i) => {
      const created = await api(stack).post<Accepted>(`${projectPathOf(projects, i)}/instances`, newInstance(`storm-${i}`, 'sim.shutdown_ms=200'))
      assert.equal(created.status, 202, JSON.stringify(created.body))
      return created.body.instance.id
    }))
    for (const [i, id] of ids.entries()) await waitForState(stack, id, 'running', 120_000, projectPathOf(projects, i))

    const accepted: string[] = []
    const answers = new Map<string, number>()
    const end = Date.now() + STORM_MS
    const client = async (): Promise<void> => {
      while (Date.now() < end) {
        const index = Math.floor(Math.random() * INSTANCES)
        const answer = await send(pickRequest(index < DOOMED), `${projectPathOf(projects, index)}/instances/${ids[index]!}`)
        const tally = `${answer.request} ${answer.status}`
        answers.set(tally, (answers.get(tally) ?? 0) + 1)
        assert.ok([200, 202, 404, 409].includes(answer.status), `${tally}: ${JSON.stringify(answer.body)}`)
        if (answer.status === 202 && answer.body.operation !== null) accepted.push(answer.body.operation.id)
        await sleep(THINK_MS * (0.5 + Math.random()))
      }
    }
    const faults = async (): Promise<void> => {
      await sleep(STORM_MS / 6)
      await stack.kill('worker')
      await stack.waitForRestart('worker')
      for (let freeze = 0; freeze < FREEZES; freeze++) {
        await sleep(STORM_MS / (FREEZES + 2))
        const frozen = await stack.kill('worker', 'SIGSTOP')
        await sleep(FROZEN_MS)
        await stack.kill('worker', 'SIGCONT')
        assert.equal(await stack.pid('worker'), frozen, 'the worker was frozen, not restarted')
      }
    }
    await Promise.all([...Array.from({ length: CLIENTS }, client), faults()])
    console.log(`${accepted.length} requests accepted; answers: ${JSON.stringify(Object.fromEntries([...answers].sort()))}`)

    // Every accepted request ends with a recorded outcome (I5)…
    await waitFor('every accepted operation to end', async () => {
      const { rows } = await db.query('SELECT id FROM operations WHERE id = ANY($1::uuid[]) AND finished_at IS NULL', [accepted])
      return rows.length === 0 ? true : null
    }, { timeoutMs: 180_000, intervalMs: 500 })
    // …as what happened: a delete recorded succeeded left its instance destroyed.
    const { rows: lies } = await db.query(
      `SELECT o.id, i.state FROM operations o JOIN instances i ON i.id = o.instance_id
        WHERE o.kind = 'delete' AND o.status = 'succeeded' AND i.state <> 'destroyed'`
    )
    assert.deepEqual(lies, [], 'deletes recorded succeeded whose instance is not destroyed')

    // Every instance settles where its record says, with nothing orphaned, doubled or leaked;
    // the reconciler re-drives an instance a halt left off its intent.
    let report: InvariantReport | null = null
    await waitFor('the stack to hold every invariant', async () => {
      report = await checkInvariants(stack.info)
      return violationsOf(report).length === 0 ? true : null
    }, { timeoutMs: 120_000, intervalMs: 1000, detail: () => violationsOf(report ?? {} as InvariantReport).join('\n') })

    const nondeterminism = (await stack.logLines('worker')).filter((line) => /Nondeterminism|TMPRL1100|out of order/.test(line))
    assert.deepEqual(nondeterminism, [], 'the worker logged no nondeterminism')
    const { replayed, failures } = await replayExecutions(stack.info)
    assert.deepEqual(failures, [], `of ${replayed} executions`)
    assert.equal((await stack.exitsOf('worker')).length, 1, 'the worker ended only by the kill')
  })

  /** Sends the request to the instance at `path`. */
  async function send (request: Request, path: string): Promise<{ request: Request, status: number, body: Accepted }> {
    const answer = request === 'delete'
      ? await api(stack).delete<Accepted>(`${path}?graceSeconds=${Math.floor(Math.random() * 3)}`)
      : await api(stack).post<Accepted>(`${path}/${request}`, request === 'stop' ? { graceSeconds: Math.floor(Math.random() * 3) } : {})
    return { request, status: answer.status, body: answer.body }
  }
})

/** Start, stop and reboot alike; a delete now and then, to the doomed instances alone. */
function pickRequest (doomed: boolean): Request {
  if (doomed && Math.random() < 0.04) return 'delete'
  const requests = ['start', 'stop', 'reboot'] as const
  return requests[Math.floor(Math.random() * requests.length)]!
}
