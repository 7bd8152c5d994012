/**
 * A stack of 2 API and 2 worker replicas (VMPLANE_API_REPLICAS, VMPLANE_WORKER_REPLICAS), with
 * HAProxy as the one address in front of the APIs: everything the API keeps holds across
 * replicas (idempotency keys, `?wait=`, rate limits), a replica killed mid-request costs its
 * clients a retry, and a worker killed mid-operation costs the operation a few seconds.
 */
import assert from 'node:assert/strict'
import { Agent, get } from 'node:http'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Client } from '@temporalio/client'
import { WebSocket } from 'ws'
import { createPool, type Pool } from '../../db/pool.js'
import { instanceWorkflowId } from '../../domain/ids.js'
import { waitUntil } from '../../stack/wait.js'
import { runCli } from '../helpers/cli.js'
import { newInstance, runningInstance, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { withTemporalClient } from '../helpers/temporal-client.js'
import { api, freePorts, startStack, type ApiResponse, type TestStack } from '../helpers/stack.js'

/** Enough for every poll this file makes in a minute; the rate-limit test spends the viewer's. */
const RATE_LIMIT = 300
const WINDOW_MS = 60_000
/** Long enough that a request is held while a replica is killed under it. */
const SLOW_BOOT = 'sim.boot_ms=3000'
/** Longer than HAProxy's `timeout http-request` (10 s), which is its idle timeout unless set. */
const IDLE_SECONDS = 12

interface Operation { id: string, status: string, startedAt: string, finishedAt: string | null }
interface Accepted { instance: InstanceBody, operation: Operation }

describe('API and worker replicas', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  let replicas: Array<ReturnType<typeof api>>
  let db: Pool

  before(async () => {
    stack = await startStack({ hosts: 1, apiReplicas: 2, workerReplicas: 2, env: { VMPLANE_API_RATE_LIMIT: String(RATE_LIMIT) } })
    replicas = stack.info.apiUrls.map((apiUrl) => api({ apiUrl, apiToken: stack.apiToken }))
    db = createPool(stack.info.databaseUrl, 1)
  })
  after(async () => {
    await db?.end()
    await stack?.stop()
  })

  /** Waits until an API has claimed each of these Idempotency-Keys and inserted its instance. */
  async function held (keys: string[], names: string[]): Promise<void> {
    await waitUntil(`${keys.join(', ')} claimed and their instances inserted`, async () => {
      const { rows: [row] } = await db.query(`SELECT
        (SELECT count(*) FROM idempotency_keys WHERE key = ANY($1) AND status IS NULL)::int AS claimed,
        (SELECT count(*) FROM instances WHERE name = ANY($2))::int AS inserted`, [keys, names])
      return row.claimed === keys.length && row.inserted === names.length
    }, { timeoutMs: 30_000, intervalMs: 50 })
  }

  it('serves through the one address and through each replica, and every replica has its metrics', async () => {
    assert.equal(stack.info.apiUrls.length, 2)
    assert.ok(!stack.info.apiUrls.includes(stack.apiUrl), 'HAProxy has the one address')
    for (const client of [api(stack), ...replicas]) assert.equal((await client.get('/v1/hosts')).status, 200)
    assert.deepEqual(Object.keys(stack.info.metricsUrls).sort(), ['agent-host-1', 'api', 'api-2', 'worker', 'worker-2'])
    for (const url of Object.values(stack.info.metricsUrls)) {
      const response = await fetch(url)
      assert.equal(response.status, 200, url)
      await response.body?.cancel()
    }
  })

  it('counts one rate limit for both replicas', async () => {
    // A fresh window of the viewer's, not about to end (it follows PostgreSQL's clock, this machine's).
    const left = WINDOW_MS - Date.now() % WINDOW_MS
    if (left < 15_000) await sleep(left + 100)
    await db.query("DELETE FROM rate_limit_windows WHERE key = 'viewer'")
    const viewers = stack.info.apiUrls.map((apiUrl) => api({ apiUrl, apiToken: stack.info.viewerToken }))
    const statuses: number[] = []
    while (statuses.length < 2 * RATE_LIMIT && !statuses.includes(429)) {
      statuses.push((await viewers[statuses.length % 2]!.get('/v1/hosts')).status)
    }
    // Each replica alone would have let the whole limit through.
    assert.equal(statuses.filter((status) => status === 200).length, RATE_LIMIT)
    for (const client of [...viewers, api({ apiUrl: stack.apiUrl, apiToken: stack.info.viewerToken })]) {
      const refused = await client.get('/v1/hosts')
      assert.equal(refused.status, 429)
      assert.ok(Number(refused.headers.get('retry-after')) > 0)
    }
  })

  it('holds an Idempotency-Key across replicas: the other refuses it while the first runs it, then answers what the first did', async () => {
    const key = 'replicas-create-1'
    const first = replicas[0]!.post<Accepted>('/v1/instances?wait=25', newInstance('keyed', SLOW_BOOT), { 'idempotency-key': key })
    await held([key], ['keyed'])
    const meanwhile = await replicas[1]!.post('/v1/instances', newInstance('keyed', SLOW_BOOT), { 'idempotency-key': key })
    assert.equal(meanwhile.status, 409, JSON.stringify(meanwhile.body))
    assert.equal(meanwhile.headers.get('retry-after'), '1')
    const answered = await first
    assert.equal(answered.status, 200, JSON.stringify(answered.body))
    assert.equal(answered.body.operation.status, 'succeeded')
    const retried = await replicas[1]!.post<Accepted>('/v1/instances', newInstance('keyed', SLOW_BOOT), { 'idempotency-key': key })
    assert.equal(retried.status, 200)
    assert.equal(retried.headers.get('idempotency-replayed'), 'true')
    assert.equal(retried.body.operation.id, answered.body.operation.id)
    assert.equal(retried.body.instance.id, answered.body.instance.id)
  })

  it('answers ?wait= requests through the one address while the replica holding them is killed', async () => {
    const names = ['held-1', 'held-2', 'held-3', 'held-4']
    const started = Date.now()
    const requests = names.map((name) => createUntilAnswered(name))
    // The least-busy balance puts two on each replica.
    await held(names.map(keyOf), names)
    const killedAt = Date.now()
    await stack.kill('api')
    const answers = await Promise.all(requests)
    console.log(`# ?wait= creates held when the api replica was killed (${((killedAt - started) / 1000).toFixed(1)} s after they were sent) were answered ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill; attempts: ${answers.map((a) => `${a.name}: ${a.attempts.join(' → ')}`).join('; ')}`)
    for (const answer of answers) {
      assert.equal(answer.response.status, 200, `${answer.name}: ${JSON.stringify(answer.response.body)}`)
      assert.equal(answer.response.body.operation.status, 'succeeded')
    }
    assert.ok(answers.some((answer) => answer.attempts.length > 1), 'some request was held by the killed replica and had to be sent again')
    // One instance per name, whichever replica answered.
    const listed = await api(stack).get<{ items: InstanceBody[] }>('/v1/instances?limit=500')
    for (const name of names) assert.equal(listed.body.items.filter((i) => i.name === name).length, 1, name)
    await stack.waitForRestart('api')
  })

  it('completes an operation at the other worker when the worker running it is killed', async () => {
    const unharmed = await create('unharmed')
    await waitForState(stack, unharmed.instance.id, 'running')
    const normal = await operationSeconds(unharmed.operation.id)
    const created = await create('worker-killed')
    const id = created.instance.id
    await waitForInstance(stack, id, (i) => i.state === 'starting' && i.vmm !== null)
    await withTemporalClient(stack.info, async (client) => {
      const history = client.workflow.getHandle(instanceWorkflowId(id))
      const holder = lastWorker(await history.fetchHistory())
      const workers = { worker: await stack.pid('worker'), 'worker-2': await stack.pid('worker-2') }
      const [killed, other] = workers.worker === holder ? ['worker', 'worker-2'] as const : ['worker-2', 'worker'] as const
      assert.equal(workers[killed], holder, `the execution's last task ran on one of the stack's workers (${holder})`)
      await stack.kill(killed)
      await waitForState(stack, id, 'running')
      // The instance reads running once its activity has recorded it, before the execution's last
      // workflow task: the history is read once the execution has ended.
      await history.result()
      const identities = workersAfter(await history.fetchHistory(), holder)
      assert.ok(identities.includes(workers[other]), `the other worker (${workers[other]}) took the execution over: ${identities.join(', ')}`)
      const seconds = await operationSeconds(created.operation.id)
      console.log(`# a create took ${seconds.toFixed(2)} s with its worker killed mid-boot, ${normal.toFixed(2)} s unharmed: ${(seconds - normal).toFixed(2)} s more`)
      await stack.waitForRestart(killed)
    })
  })

  it('passes a console WebSocket through the one address', async () => {
    const instance = await runningInstance(stack, 'console')
    const socket = new WebSocket(`${stack.apiUrl.replace('http', 'ws')}/v1/instances/${instance.id}/console`, { headers: { authorization: `Bearer ${stack.apiToken}` } })
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('open', resolve)
        socket.once('error', reject)
        socket.once('unexpected-response', (_request, response) => reject(new Error(`answered ${response.statusCode}`)))
      })
    } finally {
      socket.close()
    }
  })

  it('keeps an idle connection through the one address open as long as the Keep-Alive it passes on says', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const first = await healthz(agent)
      const promised = Number(/timeout=(\d+)/.exec(first.keepAlive ?? '')?.[1])
      assert.ok(promised > IDLE_SECONDS, `Keep-Alive: ${first.keepAlive}`)
      await sleep(IDLE_SECONDS * 1000)
      const second = await healthz(agent)
      assert.equal(second.status, 200)
      assert.equal(second.reused, true, `HAProxy closed a connection idle ${IDLE_SECONDS} s, promised ${promised} s`)
    } finally {
      agent.destroy()
    }
  })

  /** GET /healthz through HAProxy on the agent's one connection: its Keep-Alive, and whether the connection was reused. */
  async function healthz (agent: Agent): Promise<{ status: number, keepAlive: string | undefined, reused: boolean }> {
    return await new Promise((resolve, reject) => {
      const request = get(`${stack.apiUrl}/healthz`, { agent }, (response) => {
        response.resume()
        response.once('end', () => resolve({ status: response.statusCode ?? 0, keepAlive: response.headers['keep-alive']?.toString(), reused: request.reusedSocket }))
      })
      request.once('error', reject)
    })
  }

  it('the CLI given a list whose first URL is dead uses the next', async () => {
    const dead = `http://127.0.0.1:${await freePorts(1)}`
    for (const [args, env] of [
      [['--url', `${dead},${stack.apiUrl}`, '--token', stack.apiToken], {}],
      [[], { VMPLANE_URL: [dead, ...stack.info.apiUrls].join(','), VMPLANE_TOKEN: stack.apiToken }]
    ] as const) {
      const result = await runCli([...args, 'hosts', 'list'], { env })
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /^host-1 /m)
    }
  })

  /**
   * A client as the README asks one to be: it keeps its Idempotency-Key and sends the request
   * again when it gets no answer, a 5xx, or a 409 with Retry-After (its key still claimed).
   */
  async function createUntilAnswered (name: string): Promise<{ name: string, response: ApiResponse<Accepted>, attempts: string[] }> {
    const attempts: string[] = []
    const deadline = Date.now() + 120_000
    while (Date.now() < deadline) {
      try {
        const response = await api(stack).post<Accepted>('/v1/instances?wait=25', newInstance(name, SLOW_BOOT), { 'idempotency-key': keyOf(name) })
        attempts.push(String(response.status))
        const again = response.status >= 500 || (response.status === 409 && response.headers.has('retry-after'))
        if (!again) return { name, response, attempts }
        await sleep(Number(response.headers.get('retry-after') ?? '0.5') * 1000)
      } catch (error) {
        attempts.push(`no answer (${(error as Error).message})`)
        await sleep(500)
      }
    }
    throw new Error(`${name}: no answer within 120 s: ${attempts.join(' → ')}`)
  }

  async function create (name: string): Promise<Accepted> {
    const created = await api(stack).post<Accepted>('/v1/instances', newInstance(name, SLOW_BOOT))
    assert.equal(created.status, 202, JSON.stringify(created.body))
    return created.body
  }

  /** From the operation's request to its end, by the API's clock. */
  async function operationSeconds (operationId: string): Promise<number> {
    const { body } = await api(stack).get<Operation>(`/v1/operations/${operationId}`)
    assert.equal(body.status, 'succeeded')
    return (Date.parse(body.finishedAt!) - Date.parse(body.startedAt)) / 1000
  }
})

function keyOf (name: string): string {
  return `replicas-${name}`
}

type History = Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>

/** The PIDs of the workers that started the history's tasks (Temporal's identity is `pid@host`). */
function taskWorkers (history: History): number[] {
  return (history.events ?? []).flatMap((event) => {
    const identity = event.workflowTaskStartedEventAttributes?.identity ?? event.activityTaskStartedEventAttributes?.identity
    return identity == null ? [] : [Number(identity.split('@')[0])]
  })
}

function lastWorker (history: History): number {
  const workers = taskWorkers(history)
  return workers[workers.length - 1]!
}

/** The workers that started a task after `worker`'s last one. */
function workersAfter (history: History, worker: number): number[] {
  const workers = taskWorkers(history)
  return workers.slice(workers.lastIndexOf(worker) + 1)
}
