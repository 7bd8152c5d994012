/**
 * A real host-agent process for a test (`node dist/bundle/agent.js`), on its own state, image and
 * storage directories under /tmp, its own network namespace (with the bridge its TAPs go on) and
 * a free port, with short timeouts set through its configuration. Its clock can be set ahead or
 * behind the test's (libfaketime, `clockOffsetSeconds`), as a host's clock may be the control plane's.
 * It can be SIGKILLed and started again on the same directories, as a crash and restart would.
 * `cleanup()` ends the agent and every VMM process under its state directory, by PID, and
 * removes the directories and the namespace; the agent's output is kept in test-output/host-agent/.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { basename, join } from 'node:path'
import type { VmmView } from '../../../domain/host-agent-api.js'
import { findVmmProcesses } from '../../../host-agent/supervisor/adoption.js'
import type { RunningProcess } from '../../../host-agent/process/proc.js'
import type { AgentVmmRecord } from '../../../host-agent/store/record.js'
import { AGENT_ENTRY } from '../../../stack/components.js'
import { createHostNetwork, type HostNetwork } from '../../../stack/host-network.js'
import { writeStandInImages } from '../../../stack/hypervisor.js'
import { freePorts } from '../../helpers/launcher.js'
import { waitFor } from '../../../stack/wait.js'
import { findLibfaketime } from '../../../scripts/tools/faketime.js'
import { REPO_ROOT } from '../../../scripts/tools/paths.js'
import { after, before } from 'node:test'
import { WebSocket } from 'ws'
import { SIMULATOR_BINARY, buildSimulator } from './simulator.js'

const OUTPUT_DIR = join(REPO_ROOT, 'test-output', 'host-agent')
export const TOKEN = 'test-token-0123456789abcdef'

export interface AgentOptions {
  /** Where Temporal is; by default a port nothing listens on, so reports are retried in vain. */
  temporalAddress?: string
  /** More settings, overriding the test defaults. */
  env?: Record<string, string>
  /** How far the agent's clock (and its children's) runs ahead of the test's; negative: behind. */
  clockOffsetSeconds?: number
  /**
   * Makes the agent keep a lease, renewed from `apiUrl`, and pet a watchdog of `watchdogSeconds`
   * at `watchdogSocket` (both started by the test).
   */
  lease?: { watchdogSeconds: number, apiUrl: string }
}

export interface ApiResponse<T = unknown> {
  status: number
  body: T
}

let runs = 0

/** A started agent for a whole test file, cleaned up after it: `useAgent((started) => { agent = started })`. */
export function useAgent (started: (agent: TestAgent) => void): void {
  let agent: TestAgent | undefined
  before(async () => {
    await buildSimulator()
    agent = await TestAgent.create()
    await agent.start()
    started(agent)
  })
  after(async () => { await agent?.cleanup() })
}

export class TestAgent {
  child: ChildProcess | null = null
  #exit: Promise<void> | null = null

  private constructor (
    readonly root: string,
    readonly env: NodeJS.ProcessEnv,
    readonly url: string,
    readonly logFile: string,
    readonly network: HostNetwork
  ) {}

  static async create (options: AgentOptions = {}): Promise<TestAgent> {
    const root = await mkdtemp('/tmp/vmp-ag-')
    const imageDir = join(root, 'images')
    await writeStandInImages(imageDir)
    const network = await createHostNetwork('ag')
    const port = await freePorts(1)
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VMPLANE_'))),
      VMPLANE_HOST_ID: 'host-test',
      VMPLANE_AGENT_HOST: '127.0.0.1',
      VMPLANE_AGENT_PORT: String(port),
      VMPLANE_AGENT_TOKEN: TOKEN,
      VMPLANE_AGENT_STATE_DIR: join(root, 'state'),
      VMPLANE_IMAGE_DIR: imageDir,
      VMPLANE_STORAGE_DIR: join(root, 'storage'),
      VMPLANE_AGENT_NETNS: network.netns,
      VMPLANE_CLOUD_HYPERVISOR: SIMULATOR_BINARY,
      VMPLANE_TEMPORAL_ADDRESS: options.temporalAddress ?? `127.0.0.1:${await freePorts(1)}`,
      VMPLANE_HEARTBEAT_SECONDS: '0.5',
      VMPLANE_POWER_BUTTON_INTERVAL_SECONDS: '0.2',
      VMPLANE_VMM_CALL_TIMEOUT_SECONDS: '1',
      VMPLANE_VMM_PING_SECONDS: '0.2',
      VMPLANE_REPORT_RETRY_MAX_SECONDS: '0.5',
      VMPLANE_LOG_LEVEL: 'debug',
      ...options.clockOffsetSeconds === undefined ? {} : await skewedClock(options.clockOffsetSeconds),
      ...options.lease === undefined ? {} : { VMPLANE_AGENT_WATCHDOG: `unix:${join(root, 'watchdog.sock')}`, VMPLANE_HOST_WATCHDOG_SECONDS: String(options.lease.watchdogSeconds), VMPLANE_API_URL: options.lease.apiUrl },
      ...options.env
    }
    await mkdir(OUTPUT_DIR, { recursive: true })
    return new TestAgent(root, env, `http://127.0.0.1:${port}`, join(OUTPUT_DIR, `${basename(root)}.log`), network)
  }

  get stateDir (): string {
    return this.env.VMPLANE_AGENT_STATE_DIR!
  }

  get imageDir (): string {
    return this.env.VMPLANE_IMAGE_DIR!
  }

  get storageDir (): string {
    return this.env.VMPLANE_STORAGE_DIR!
  }

  get watchdogSocket (): string {
    return join(this.root, 'watchdog.sock')
  }

  get vmmsDir (): string {
    return join(this.stateDir, 'vmms')
  }

  get pid (): number {
    if (this.child?.pid === undefined) throw new Error('the agent is not running')
    return this.child.pid
  }

  /** Starts the agent and waits until it answers /healthz. */
  async start (): Promise<void> {
    const child = spawn(process.execPath, [AGENT_ENTRY], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] })
    const log = createWriteStream(this.logFile, { flags: 'a' })
    log.write(`--- agent run ${++runs} (pid ${child.pid})\n`)
    child.stdout!.pipe(log, { end: false })
    child.stderr!.pipe(log, { end: false })
    this.child = child
    this.#exit = new Promise((resolve) => child.once('exit', () => { resolve() }))
    const exited = new AbortController()
    child.once('exit', () => { exited.abort() })
    await waitFor('the agent answering /healthz', async () => {
      const response = await fetch(`${this.url}/healthz`, { signal: AbortSignal.timeout(1000) })
      return response.ok ? true : null
    }, { timeoutMs: 15_000, intervalMs: 50, signal: exited.signal })
  }

  /** Signals the agent (SIGKILL: a crash) and waits for it to be gone. */
  async kill (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.child === null) return
    if (this.child.exitCode === null && this.child.signalCode === null) process.kill(this.pid, signal)
    await this.#exit
    this.child = null
  }

  async request<T = VmmView> (method: string, path: string, body?: unknown, token = TOKEN): Promise<ApiResponse<T>> {
    const response = await fetch(`${this.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' })
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(20_000)
    })
    const text = await response.text()
    return { status: response.status, body: (text === '' ? undefined : JSON.parse(text)) as T }
  }

  /** Ensures a new VMM whose guest behaves as `cmdline` says; returns the 201 answer. */
  async ensure (cmdline?: string): Promise<VmmView> {
    const response = await this.request('PUT', `/v1/vmms/${newVmmId()}`, ensureBody(cmdline))
    if (response.status !== 201) throw new Error(`ensure: ${response.status} ${JSON.stringify(response.body)}`)
    return response.body
  }

  /** Ensures a new VMM and waits until it runs. */
  async ensureRunning (cmdline?: string): Promise<VmmView> {
    return await this.waitForState((await this.ensure(cmdline)).id, 'running')
  }

  async vmm (id: string): Promise<VmmView> {
    const response = await this.request('GET', `/v1/vmms/${id}`)
    if (response.status !== 200) throw new Error(`GET ${id}: ${response.status} ${JSON.stringify(response.body)}`)
    return response.body
  }

  /** Waits until the VMM's view satisfies `accept`, and returns it. */
  async waitForVmm (id: string, what: string, accept: (view: VmmView) => boolean, timeoutMs = 10_000): Promise<VmmView> {
    let last: VmmView | null = null
    return await waitFor(`VMM ${id} ${what}`, async () => {
      last = await this.vmm(id)
      return accept(last) ? last : null
    }, { timeoutMs, intervalMs: 50, detail: () => `last seen: ${JSON.stringify(last)}` })
  }

  async waitForState (id: string, state: VmmView['state'], timeoutMs?: number): Promise<VmmView> {
    return await this.waitForVmm(id, `reaching ${state}`, (view) => view.state === state, timeoutMs)
  }

  /** Types `input` at the VMM's interactive console (WebSocket) and waits until what comes back matches `expected`. */
  async typeAtConsole (vmmId: string, input: string, expected: RegExp): Promise<void> {
    const socket = new WebSocket(`${this.url.replace('http', 'ws')}/v1/vmms/${vmmId}/console`, { headers: { authorization: `Bearer ${TOKEN}` } })
    let received = ''
    socket.on('message', (data: Buffer) => { received += data.toString() })
    try {
      await new Promise((resolve, reject) => { socket.once('open', resolve).once('error', reject) })
      socket.send(Buffer.from(input))
      await waitFor(`the console of ${vmmId} answering ${JSON.stringify(input)}`, async () => expected.test(received) ? true : null, { timeoutMs: 5000, intervalMs: 20 })
    } finally {
      socket.close()
    }
  }

  /** The live VMM processes under this agent's state directory. */
  async vmmProcesses (): Promise<RunningProcess[]> {
    return [...(await findVmmProcesses(this.vmmsDir)).values()]
  }

  async cleanup (): Promise<void> {
    await this.kill()
    for (const vmm of await this.vmmProcesses()) {
      try {
        process.kill(vmm.pid, 'SIGKILL')
      } catch {
        // Already gone.
      }
    }
    await this.network.remove()
    await rm(this.root, { recursive: true, force: true })
  }
}

/**
 * The environment that runs a process on a clock `seconds` off the test's: libfaketime shifts
 * the wall clock (Date.now()) only; the monotonic clock timers run on is left alone.
 */
async function skewedClock (seconds: number): Promise<NodeJS.ProcessEnv> {
  const library = await findLibfaketime()
  if (library === null) throw new Error('an agent with a skewed clock needs libfaketime: apt-get install libfaketime (npm test installs it)')
  return { LD_PRELOAD: library, FAKETIME: `${seconds >= 0 ? '+' : ''}${seconds}s`, FAKETIME_DONT_FAKE_MONOTONIC: '1' }
}

let instances = 0

/** An ensure request whose guest behaves as `cmdline` says (sim.* directives). */
export function ensureBody (cmdline = 'console=ttyS0', instanceId?: string): object {
  const n = instances++
  return {
    instanceId: instanceId ?? `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    instanceName: `test-${n}`,
    spec: { vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux', initramfs: 'initrd.img', cmdline } }
  }
}

export function newVmmId (): string {
  return crypto.randomUUID()
}

/** An agent's record of a VMM of a fresh instance, running unless `changes` say otherwise, as a restarted agent would load it. */
export function agentRecord (changes: Partial<AgentVmmRecord> = {}): AgentVmmRecord {
  const at = new Date().toISOString()
  const body = ensureBody() as Pick<AgentVmmRecord, 'instanceId' | 'instanceName' | 'spec'>
  return {
    id: newVmmId(),
    ...body,
    state: 'running',
    generation: 2,
    reportedGeneration: 2,
    pid: null,
    pidStartTime: null,
    createdAt: at,
    updatedAt: at,
    reason: 'VM booted',
    exit: null,
    stopDeadline: null,
    unresponsiveSince: null,
    destroyRequested: false,
    pendingKill: null,
    migration: null,
    incoming: null,
    outgoing: null,
    policy: null,
    ...changes
  }
}
