/**
 * A real agent holding its host's lease, beside a real host watchdog process (docs/design.md §17):
 * it renews the lease from the control plane's API and acknowledges each grant it took; it takes no
 * new VMM without the lease; a lapsed lease fences the host unless a majority of its peers vouch for
 * an outage; a frozen agent is fenced by its watchdog; each VMM killed so is recorded `fenced`. The
 * API's lease route is the test's own (`PUT /v1/hosts/:id/lease`), answering as the test says, with
 * grants shaped as the API makes them (api/services/host-lease-renewals.ts, tested on PostgreSQL in
 * test/activities/host-leases.test.ts).
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { join } from 'node:path'
import { after, afterEach, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { LeasePeer, VmmView } from '../../domain/host-agent-api.js'
import type { LeaseGrant, LeaseRenewal } from '../../domain/host-lease-api.js'
import { WATCHDOG_ENTRY } from '../../stack/components.js'
import { waitUntil } from '../../stack/wait.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { freePorts } from '../helpers/launcher.js'
import { TestAgent, TOKEN } from './helpers/agent.js'
import { buildSimulator, processExists } from './helpers/simulator.js'

const TERM_MS = 3_000
const GRANT_MAX_AGE_MS = 1_000
const WATCHDOG_SECONDS = 2

let agent: TestAgent
let watchdog: ChildProcess | null = null

/** The API's lease route as the test's: grants while `granting`, after `delayMs`; every renewal kept. */
const api = {
  granting: false,
  delayMs: 0,
  peers: [] as LeasePeer[],
  renewals: [] as Array<{ hostId: string, authorized: boolean, body: LeaseRenewal }>,
  grants: [] as number[],
  server: null as Server | null,
  url: ''
}

before(async () => {
  await buildSimulator()
  const port = await freePorts(1)
  api.server = createServer((request, response) => {
    let text = ''
    request.on('data', (chunk: Buffer) => { text += chunk.toString() })
    request.on('end', () => {
      const hostId = /^\/v1\/hosts\/([^/]+)\/lease$/.exec(request.url ?? '')?.[1] ?? ''
      api.renewals.push({ hostId, authorized: request.headers.authorization === `Bearer ${TOKEN}`, body: JSON.parse(text) })
      if (!api.granting) {
        response.statusCode = 503
        response.end()
        return
      }
      const grantedAt = Date.now() + api.grants.length / 1000
      api.grants.push(grantedAt)
      const grant: LeaseGrant = { grantedAt, termMs: TERM_MS, grantMaxAgeMs: GRANT_MAX_AGE_MS, peerAskMs: 500, peers: api.peers }
      setTimeout(() => {
        response.setHeader('content-type', 'application/json')
        response.end(JSON.stringify(grant))
      }, api.delayMs)
    })
  })
  await new Promise<void>((resolve) => api.server!.listen(port, '127.0.0.1', resolve))
  api.url = `http://127.0.0.1:${port}`
})
after(() => { api.server?.close() })
afterEach(async () => {
  stopGranting()
  watchdog?.kill('SIGTERM')
  watchdog = null
  if (agent?.child !== null && agent?.child !== undefined) process.kill(agent.pid, 'SIGCONT')
  await agent?.cleanup()
})

/** Starts the host's watchdog beside the agent, on the socket the agent pets. */
async function startWatchdog (socketPath: string): Promise<void> {
  const log = createWriteStream(join(REPO_ROOT, 'test-output', 'host-agent', `watchdog-${process.pid}.log`), { flags: 'a' })
  watchdog = spawn(process.execPath, [WATCHDOG_ENTRY], {
    env: {
      ...process.env,
      VMPLANE_HOST_ID: 'host-test',
      VMPLANE_AGENT_STATE_DIR: agent.stateDir,
      VMPLANE_WATCHDOG_SOCKET: socketPath,
      VMPLANE_HOST_WATCHDOG_SECONDS: String(WATCHDOG_SECONDS)
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  watchdog.stdout!.pipe(log)
  watchdog.stderr!.pipe(log)
}

/** Grants the agent's renewals from now on, naming `peers`, until it holds its lease. */
async function keepGranting (peers: LeasePeer[] = []): Promise<void> {
  api.peers = peers
  api.granting = true
  await waitUntil('the agent to take a grant', leaseHeld, { timeoutMs: 15_000, intervalMs: 100 })
}

function stopGranting (): void {
  api.granting = false
  api.delayMs = 0
}

/** Whether the agent says, in its metrics, that it holds its lease now. */
async function leaseHeld (): Promise<boolean> {
  const metrics = await fetch(`${agent.url}/metrics`).then(async (response) => await response.text())
  return /^vmplane_agent_lease_held\S* 1$/m.test(metrics)
}

async function holds (): Promise<boolean> {
  return (await agent.request<{ holds: boolean }>('GET', '/v1/lease')).body.holds
}

/** A peer agent that answers whether it holds its lease as `holds` says. */
async function peer (hostId: string, answer: () => boolean): Promise<{ peer: LeasePeer, server: Server }> {
  const port = await freePorts(1)
  const server = createServer((_request, response) => {
    response.setHeader('content-type', 'application/json')
    response.end(JSON.stringify({ hostId, holds: answer() }))
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return { peer: { hostId, agentUrl: `http://127.0.0.1:${port}` }, server }
}

/** A new agent that pets a watchdog (not started yet), and its watchdog, listening. */
async function started (): Promise<void> {
  api.renewals.length = 0
  api.grants.length = 0
  agent = await TestAgent.create({ lease: { watchdogSeconds: WATCHDOG_SECONDS, apiUrl: api.url } })
  await startWatchdog(agent.watchdogSocket)
}

describe('the host lease, on a real agent and watchdog', () => {
  let peers: Array<{ server: Server }> = []
  after(() => { for (const { server } of peers) server.close() })

  it('takes no new VMM without its lease (503, saying so), and takes them once it holds it', async () => {
    await started()
    await agent.start()
    assert.equal(await holds(), false)
    const refused = await agent.request('PUT', `/v1/vmms/${crypto.randomUUID()}`, { instanceId: crypto.randomUUID(), instanceName: 'no-lease', spec: { vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux', initramfs: 'initrd.img' } } })
    assert.equal(refused.status, 503)
    assert.match(JSON.stringify(refused.body), /holds no lease/)
    await keepGranting()
    await agent.ensureRunning()
    assert.equal(await holds(), false, 'a peer is told it holds its lease only once held a term')
    await waitUntil('the agent to tell peers it holds its lease', holds, { timeoutMs: TERM_MS + 2_000 })
  })

  it('renews with its token and its watchdog\'s timeout, acknowledging each grant it took in its next renewal', async () => {
    await started()
    await agent.start()
    await keepGranting()
    await waitUntil('a renewal acknowledging a grant', async () => api.renewals.some((r) => r.body.took !== null), { timeoutMs: 10_000 })
    for (const renewal of api.renewals) {
      assert.deepEqual([renewal.hostId, renewal.authorized, renewal.body.watchdogMs], ['host-test', true, WATCHDOG_SECONDS * 1000])
      assert.ok(renewal.body.took === null || api.grants.includes(renewal.body.took), `took ${renewal.body.took}: a grant the API made`)
    }
  })

  it('refuses a grant that comes later than its age allows after the renewal was sent', async () => {
    await started()
    api.delayMs = GRANT_MAX_AGE_MS + 300
    api.granting = true
    await agent.start()
    await waitUntil('three renewals answered late', async () => api.grants.length >= 3, { timeoutMs: 15_000 })
    assert.equal(await leaseHeld(), false)
    assert.equal(await holds(), false)
  })

  it('fences its host when its lease lapses and no peer answers: every VMM killed, recorded fenced; no watchdog needed', async () => {
    await started()
    await agent.start()
    await keepGranting([{ hostId: 'host-gone', agentUrl: 'http://127.0.0.1:9' }])
    const vmms = [await agent.ensureRunning(), await agent.ensureRunning()]
    stopGranting()
    for (const vmm of vmms) {
      const ended = await agent.waitForState(vmm.id, 'failed', TERM_MS + 5_000)
      assert.equal(ended.exit?.cause, 'fenced')
      assert.equal(processExists(vmm.pid!), false)
    }
  })

  it('keeps its VMMs when its lease lapses while a majority of its peers hold none either (the control plane is down)', async () => {
    await started()
    await agent.start()
    const made = await Promise.all([peer('host-2', () => false), peer('host-3', () => false), peer('host-4', () => true)])
    peers = made
    await keepGranting(made.map((p) => p.peer))
    const vmm = await agent.ensureRunning()
    stopGranting()
    // Past the term, and past the watchdog's timeout since the last grant-backed pet.
    await sleep(TERM_MS + (WATCHDOG_SECONDS + 2) * 1000)
    assert.equal((await agent.vmm(vmm.id)).state, 'running')
    assert.ok(processExists(vmm.pid!), 'the VMM still runs')
  })

  it('frozen while it holds its lease, is fenced by its watchdog within its timeout; the VMMs are recorded fenced once it thaws', async () => {
    await started()
    await agent.start()
    await keepGranting()
    const vmm: VmmView = await agent.ensureRunning()
    process.kill(agent.pid, 'SIGSTOP')
    const frozenAt = Date.now()
    // Its bound: the timeout after the last pet (at most a second before the freeze), and the kill.
    await waitUntil('the watchdog to kill the VMM', async () => !processExists(vmm.pid!), { timeoutMs: (WATCHDOG_SECONDS + 3) * 1000, intervalMs: 50 })
    console.log(`the watchdog fenced the host ${Date.now() - frozenAt} ms after the agent froze (timeout ${WATCHDOG_SECONDS} s, pets every second)`)
    process.kill(agent.pid, 'SIGCONT')
    const ended = await agent.waitForState(vmm.id, 'failed')
    assert.equal(ended.exit?.cause, 'fenced')
    assert.match(ended.reason ?? '', /watchdog/)
  })
})
