/**
 * A real agent holding its host's lease, beside a real host watchdog process (docs/design.md §17):
 * no new VMM without the lease; a lapsed lease fences the host unless a majority of its peers
 * vouch for an outage; a frozen agent is fenced by its watchdog; each VMM killed so is recorded
 * `fenced`. The control plane's grants are the test's own, made as the worker would make them.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { join } from 'node:path'
import { after, afterEach, before, describe, it } from 'node:test'
import type { HostAnnouncement } from '../../domain/host.js'
import type { LeasePeer, VmmView } from '../../domain/host-agent-api.js'
import { hostWorkflowId } from '../../domain/ids.js'
import { WATCHDOG_ENTRY } from '../../stack/components.js'
import { waitUntil } from '../../stack/wait.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { freePorts } from '../helpers/launcher.js'
import { TestAgent } from './helpers/agent.js'
import { buildSimulator, processExists, tempDir } from './helpers/simulator.js'
import { TestTemporal } from './helpers/temporal.js'

const TERM_MS = 3_000
const WATCHDOG_SECONDS = 2

let agent: TestAgent
let watchdog: ChildProcess | null = null
let granting: NodeJS.Timeout | null = null

// A Temporal for the agents' heartbeats to reach: the test grants the lease to the latest, as the
// host's monitor would.
let dir: { dir: string, remove: () => Promise<void> }
let temporal: TestTemporal
before(async () => {
  await buildSimulator()
  dir = await tempDir('vmp-lease-')
  temporal = await TestTemporal.start(dir.dir)
})
after(async () => {
  await temporal?.kill()
  await dir?.remove()
})
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

/** A grant for the heartbeat `seq`, as the worker sends it; whether the agent took it. */
async function grant (seq: number, peers: LeasePeer[] = [], to: TestAgent = agent): Promise<boolean> {
  const answer = await to.request<{ taken: boolean }>('PUT', '/v1/lease', { seq, termMs: TERM_MS, grantMaxAgeMs: 1_000, peerAskMs: 500, peers })
  assert.equal(answer.status, 200, JSON.stringify(answer.body))
  return answer.body.taken
}

/** The lease request of the agent's latest heartbeat, as its host's monitor receives it. */
async function latestRequest (): Promise<number | null> {
  const heartbeats = (await temporal.signals(hostWorkflowId('host-test')).catch(() => [])).filter((signal) => signal.name === 'hostHeartbeat')
  return (heartbeats.at(-1)?.args[0] as HostAnnouncement | undefined)?.lease?.seq ?? null
}

/** Grants the lease in answer to the agent's heartbeats as they come, every 200 ms, as its host's monitor would. */
async function keepGranting (peers: LeasePeer[] = []): Promise<void> {
  const to = agent
  let granted = 0
  const grantLatest = async (): Promise<boolean> => {
    const seq = await latestRequest()
    if (seq === null || seq === granted) return false
    granted = seq
    return await grant(seq, peers, to)
  }
  await waitUntil('the agent to take a grant for its latest heartbeat', grantLatest, { timeoutMs: 15_000, intervalMs: 100 })
  granting = setInterval(() => { grantLatest().catch(() => {}) }, 200)
}

function stopGranting (): void {
  if (granting !== null) clearInterval(granting)
  granting = null
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

/** A new agent that pets a watchdog (not started yet), and the socket the watchdog is to listen on. */
async function started (): Promise<{ socket: string }> {
  agent = await TestAgent.create({ watchdogSeconds: WATCHDOG_SECONDS, temporalAddress: temporal.address })
  return { socket: agent.watchdogSocket }
}

describe('the host lease, on a real agent and watchdog', () => {
  let peers: Array<{ server: Server }> = []
  after(() => { for (const { server } of peers) server.close() })

  it('takes no new VMM without its lease (503, saying so), and takes them once it holds it', async () => {
    const { socket } = await started()
    await startWatchdog(socket)
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

  it('refuses a grant for a heartbeat it never sent, or sent too long ago', async () => {
    const { socket } = await started()
    await startWatchdog(socket)
    await agent.start()
    assert.equal(await grant(1_000_000), false)
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    assert.equal(await grant(1), false, 'the first heartbeat went out more than a second ago')
  })

  it('fences its host when its lease lapses and no peer answers: every VMM killed, recorded fenced; no watchdog needed', async () => {
    const { socket } = await started()
    await startWatchdog(socket)
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
    const { socket } = await started()
    await startWatchdog(socket)
    await agent.start()
    const made = await Promise.all([peer('host-2', () => false), peer('host-3', () => false), peer('host-4', () => true)])
    peers = made
    await keepGranting(made.map((p) => p.peer))
    const vmm = await agent.ensureRunning()
    stopGranting()
    // Past the term, and past the watchdog's timeout since the last grant-backed pet.
    await new Promise((resolve) => setTimeout(resolve, TERM_MS + (WATCHDOG_SECONDS + 2) * 1000))
    assert.equal((await agent.vmm(vmm.id)).state, 'running')
    assert.ok(processExists(vmm.pid!), 'the VMM still runs')
  })

  it('frozen while it holds its lease, is fenced by its watchdog within its timeout; the VMMs are recorded fenced once it thaws', async () => {
    const { socket } = await started()
    await startWatchdog(socket)
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
