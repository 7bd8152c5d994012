/**
 * A whole vmplane stack for a test or a benchmark: `node dist/stack/dev-stack.js`, as `npm start`
 * runs it, on a fresh data directory under /tmp with free ports for everything. `stop()` leaves
 * nothing behind: no process, no VMM, no data directory; the stack's logs are kept in
 * `<outputDir>/<name>/`. A stack left running keeps the process that launched it alive.
 *
 *   const stack = await launchStack({ outputDir })
 *   const { status, body } = await api(stack).get('/v1/instances')
 *   await stack.stop()
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { basename, join } from 'node:path'
import { TEMPORAL_CLUSTER_PORTS, defaultReplicas } from '../../stack/config.js'
import { stackPaths, type StackPaths } from '../../stack/data-dir.js'
import { readPidFile, readPidFiles } from '../../stack/pid-files.js'
import { findVmmProcesses, isRunning, signalProcess, terminate } from '../../stack/processes.js'
import { readStackFile, type StackInfo } from '../../stack/stack-file.js'
import { removeStackNetwork } from '../../stack/stack-lan.js'
import { waitForStackReady } from '../../stack/readiness.js'
import { waitFor } from '../../stack/wait.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

export { api, type ApiResponse } from '../../stack/api-requests.js'

const DEV_STACK = join(REPO_ROOT, 'dist', 'stack', 'dev-stack.js')
/** A cold start creates a PostgreSQL cluster and a Temporal database: allow for a slow machine. */
const DEFAULT_READY_TIMEOUT_MS = 240_000
/** Longer than the stack's own stop: 10 s per stage, three stages. */
const STOP_TIMEOUT_MS = 60_000
const TAIL_LINES = 60
/** A supervisor's note that a component's process ended (supervisor.ts, output.ts). */
const SUPERVISOR_EXIT_NOTE = /^--- (\S+) exited with /
/** The stack's own lines, beside its components' logs. */
const STACK_LOG = 'stack'

export interface StackOptions {
  /** Where the stack's output and logs are kept, in a folder named after its data directory. */
  outputDir: string
  /** VMPLANE_HOSTS; 2 unless given. */
  hosts?: number
  /** VMPLANE_TEMPORAL: the dev server unless given. */
  temporal?: 'dev' | 'cluster'
  /** VMPLANE_API_REPLICAS and VMPLANE_WORKER_REPLICAS; unless given, 1 on the dev shape, 2 on the cluster shape. */
  apiReplicas?: number
  workerReplicas?: number
  /** More settings for the stack and its components (VMPLANE_BOOT_TIMEOUT_SECONDS, say). */
  env?: Record<string, string>
  readyTimeoutMs?: number
}

/** Components by name: postgres, temporal, worker, worker-2, …, api, api-2, …, haproxy, agent-host-1, agent-host-2, … */
export type ComponentName = string

interface Setup {
  dataDir: string
  env: NodeJS.ProcessEnv
  outputDir: string
  readyTimeoutMs: number
}

export async function launchStack (options: StackOptions): Promise<LaunchedStack> {
  // Short: VMM API sockets live inside it, and a Unix socket path has at most 107 bytes.
  const dataDir = await mkdtemp('/tmp/vmp-')
  // The PostgreSQL server runs as the `postgres` user (when tests run as root): it must be
  // able to reach its cluster inside.
  await chmod(dataDir, 0o755)
  const hosts = options.hosts ?? 2
  const temporal = options.temporal ?? 'dev'
  const apiReplicas = options.apiReplicas ?? defaultReplicas(temporal)
  const workerReplicas = options.workerReplicas ?? defaultReplicas(temporal)
  const temporalPort = await freePorts(1)
  const temporalUiPort = await freePorts(1)
  const pgPort = await freePorts(1)
  const env: NodeJS.ProcessEnv = {
    ...inheritedEnv(),
    VMPLANE_DATA_DIR: dataDir,
    VMPLANE_HOSTS: String(hosts),
    VMPLANE_TEMPORAL: temporal,
    VMPLANE_API_REPLICAS: String(apiReplicas),
    VMPLANE_WORKER_REPLICAS: String(workerReplicas),
    VMPLANE_TEMPORAL_PORT: String(temporalPort),
    // Read by the cluster shape only (VMPLANE_TEMPORAL=cluster): its services' other ports.
    VMPLANE_TEMPORAL_CLUSTER_PORT: String(await freePorts(TEMPORAL_CLUSTER_PORTS)),
    VMPLANE_TEMPORAL_UI_PORT: String(temporalUiPort),
    VMPLANE_PG_PORT: String(pgPort),
    // The API port, and the ports after it for the replicas behind HAProxy when there are several.
    VMPLANE_API_PORT: String(await freePorts(apiReplicas + 1)),
    VMPLANE_AGENT_PORT: String(await freePorts(hosts)),
    VMPLANE_WORKER_METRICS_PORT: String(await freePorts(workerReplicas)),
    ...options.env
  }
  return await launch({
    dataDir,
    env,
    outputDir: join(options.outputDir, basename(dataDir)),
    readyTimeoutMs: options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS
  })
}

/** The test's environment without vmplane settings, which would point the stack elsewhere. */
function inheritedEnv (): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env)
    .filter(([name]) => !name.startsWith('VMPLANE_') && name !== 'DATABASE_URL'))
}

async function launch (setup: Setup): Promise<LaunchedStack> {
  await mkdir(setup.outputDir, { recursive: true })
  const child = spawn(process.execPath, [DEV_STACK], { cwd: REPO_ROOT, env: setup.env, stdio: ['ignore', 'pipe', 'pipe'] })
  const output = new OutputTail(join(setup.outputDir, 'dev-stack.log'))
  output.follow(child)
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const exited = new AbortController()
  child.once('exit', () => exited.abort())

  const paths = stackPaths(setup.dataDir)
  try {
    const info = await waitFor('the dev stack writing run/stack.json', () => readStackFile(paths.stackFile), {
      timeoutMs: setup.readyTimeoutMs,
      intervalMs: 200,
      signal: exited.signal,
      detail: () => output.tail()
    })
    return new LaunchedStack(setup, paths, child, exit, output, info)
  } catch (error) {
    await new LaunchedStack(setup, paths, child, exit, output, null).stop()
    if (exited.signal.aborted) {
      throw new Error(`the dev stack exited with code ${await exit} before it was ready:\n${output.tail()}`)
    }
    throw error
  }
}

export class LaunchedStack {
  readonly dataDir: string
  /** The environment the stack was started with: its settings, for running tools against it. */
  readonly env: NodeJS.ProcessEnv
  private readonly killed = new Map<ComponentName, number>()

  constructor (
    private readonly setup: Setup,
    readonly paths: StackPaths,
    private readonly child: ChildProcess,
    private readonly exit: Promise<number | null>,
    private readonly output: OutputTail,
    private readonly stackInfo: StackInfo | null
  ) {
    this.dataDir = setup.dataDir
    this.env = setup.env
  }

  /** What run/stack.json says: URLs, tokens, hosts. */
  get info (): StackInfo {
    if (this.stackInfo === null) throw new Error('the stack never became ready')
    return this.stackInfo
  }

  get apiUrl (): string { return this.info.apiUrl }
  get apiToken (): string { return this.info.apiToken }

  /** The dev stack's own process ID. */
  get stackPid (): number {
    if (this.child.pid === undefined) throw new Error('the dev stack did not start')
    return this.child.pid
  }

  /** The PID of a component's current process, from its PID file. */
  async pid (component: ComponentName): Promise<number> {
    const pid = await readPidFile(this.paths.runDir, component)
    if (pid === null) throw new Error(`${component} has no PID file: it is not running`)
    return pid
  }

  /**
   * Signals a component's current process (SIGKILL unless told otherwise); returns its PID. A
   * component between processes (one that ended itself a moment ago at a crash point, its
   * successor not yet started by the supervisor) is signalled once its successor runs.
   */
  async kill (component: ComponentName, signal: NodeJS.Signals = 'SIGKILL'): Promise<number> {
    const pid = await waitFor(`${component} running, to send it ${signal}`, async () => {
      const pid = await this.runningPid(component)
      return pid !== null && signalProcess(pid, signal) ? pid : null
    }, { timeoutMs: 60_000, detail: () => this.output.tail() })
    // A frozen or thawed process goes on: only a signal that ends it makes a restart to wait for.
    if (signal !== 'SIGSTOP' && signal !== 'SIGCONT') this.killed.set(component, pid)
    return pid
  }

  /** Waits until the stack has started a new process for a component killed by `kill()`. */
  async waitForRestart (component: ComponentName, timeoutMs = 60_000): Promise<number> {
    const before = this.killed.get(component)
    return await waitFor(`${component} restarted`, async () => {
      const pid = await this.runningPid(component)
      return pid !== null && pid !== before ? pid : null
    }, { timeoutMs, detail: () => this.output.tail() })
  }

  /** The PID its PID file names, if that process runs. */
  private async runningPid (component: ComponentName): Promise<number | null> {
    const pid = await readPidFile(this.paths.runDir, component)
    return pid !== null && await isRunning(pid) ? pid : null
  }

  /**
   * Every time a component's process ended while the stack ran, oldest first: the supervisor's
   * note in the component's log (`exited with signal SIGKILL after 9.3 s; restarting in 0.3 s`),
   * when it was written (ms since the epoch), and the lines the process wrote last before it.
   */
  async exitsOf (component: ComponentName, linesBefore = 20): Promise<Array<{ note: string, at: number, before: string[] }>> {
    const log = await this.logLines(component)
    // The supervisor's notes only: PostgreSQL logs its own children's exits in the same words.
    return log.flatMap((line, index) => {
      const note = SUPERVISOR_EXIT_NOTE.exec(line)
      return note === null ? [] : [{ note: line, at: Date.parse(note[1]!), before: log.slice(Math.max(0, index - linesBefore), index) }]
    })
  }

  /** Every component the stack has run, whatever its shape: each has a log of its own. */
  async components (): Promise<ComponentName[]> {
    const files = await readdir(this.paths.logDir).catch(() => [])
    return files.filter((file) => file.endsWith('.log')).map((file) => file.slice(0, -'.log'.length)).filter((name) => name !== STACK_LOG)
  }

  /** Every line of a component's log: its output and its supervisor's notes. */
  async logLines (component: ComponentName): Promise<string[]> {
    const text = await readFile(join(this.paths.logDir, `${component}.log`), 'utf8').catch(() => '')
    return text.split('\n').filter((line) => line !== '')
  }

  /** Waits until the stack is ready again, as its start does (stack/readiness.ts). */
  async waitForReady (timeoutMs = 120_000): Promise<void> {
    await waitForStackReady({ ...this.info, apiToken: this.info.viewerToken }, { timeoutMs, detail: () => this.output.tail() })
  }

  /** The last lines the dev stack printed. */
  tail (): string {
    return this.output.tail()
  }

  /**
   * Stops the stack with SIGTERM, as an operator would, and returns its exit code. VMMs keep
   * running and the data directory stays, as after `npm start` and Ctrl-C.
   */
  async shutdown (): Promise<number | null> {
    return await this.stopProcesses()
  }

  /** `shutdown()`, then kills every VMM the stack left running and removes its networks and data directory. */
  async stop (): Promise<number | null> {
    const code = await this.stopProcesses()
    await terminate(await findVmmProcesses(this.dataDir), 5000)
    await removeStackNetwork(this.dataDir)
    await cp(this.paths.logDir, join(this.setup.outputDir, 'logs'), { recursive: true }).catch(() => {})
    await rm(this.dataDir, { recursive: true, force: true })
    return code
  }

  /** Stops the stack (VMMs keep running) and starts it again on the same data directory and ports. */
  async restart (): Promise<LaunchedStack> {
    const code = await this.stopProcesses()
    if (code !== 0) throw new Error(`the dev stack exited with code ${code} when stopped:\n${this.output.tail()}`)
    return await launch(this.setup)
  }

  /** SIGTERM and wait; past the timeout, SIGKILL the stack and every component by its PID file. */
  private async stopProcesses (): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM')
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(resolve, STOP_TIMEOUT_MS, 'timeout').unref())
    const code = await Promise.race([this.exit, timeout])
    if (code !== 'timeout') {
      await this.output.close()
      return code
    }
    // The stack is stuck: kill it, and every component it had running, by their PID files.
    this.child.kill('SIGKILL')
    await terminate([...(await readPidFiles(this.paths.runDir)).values()], 5000)
    await this.exit
    await this.output.close()
    return null
  }
}

/** The dev stack's output: all of it to a file, the last lines kept for error messages. */
class OutputTail {
  private readonly file
  private readonly lines: string[] = []

  constructor (path: string) {
    this.file = createWriteStream(path, { flags: 'a' })
  }

  follow (child: ChildProcess): void {
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding('utf8')
      stream?.on('data', (text: string) => {
        this.file.write(text)
        this.lines.push(...text.split('\n').filter((line) => line !== ''))
        this.lines.splice(0, Math.max(0, this.lines.length - TAIL_LINES))
      })
    }
  }

  tail (): string {
    return this.lines.join('\n')
  }

  async close (): Promise<void> {
    if (!this.file.writableEnded) await new Promise((resolve) => this.file.end(resolve))
  }
}

/** Ports this process has handed out: free when picked, but taken once their stack runs. */
const handedOut = new Set<number>()

/**
 * Ports are picked below the kernel's ephemeral range (`ip_local_port_range`), never by listening
 * on port 0, which picks inside it: between the pick and the child's listen, any outgoing
 * connection may take the port as its local end, and a long-lived one (a pooled connection to
 * Temporal or PostgreSQL) kept a test stack's API from listening for minutes (EADDRINUSE).
 */
export const PICKABLE = { min: 10_000, max: ephemeralRangeStart() - 1 }

/**
 * Ports in that range that browsers refuse to load pages from (Chromium's `kRestrictedPorts`,
 * net::ERR_UNSAFE_PORT): the UI test's browser could not open a Temporal UI listening on one.
 */
const BROWSER_UNSAFE = new Set([10_080])

/**
 * Test files run side by side (scripts/test.mjs), each picking ports for its stacks: a port one
 * picked is claimed for the machine by a file named after it, holding the picker's PID, made
 * only if absent; a claim whose process is gone may be taken over.
 */
const CLAIMS_DIR = '/tmp/vmp-port-claims'
let releasingAtExit = false

function ephemeralRangeStart (): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768
  } catch {
    return 32_768
  }
}

/** The first of `count` consecutive ports on 127.0.0.1 that nothing listens on now, claimed for this process. */
export async function freePorts (count: number): Promise<number> {
  for (;;) {
    const first = PICKABLE.min + Math.floor(Math.random() * (PICKABLE.max - PICKABLE.min - count + 2))
    const range = Array.from({ length: count }, (_, i) => first + i)
    let free = range.every((port) => !handedOut.has(port) && !BROWSER_UNSAFE.has(port))
    for (const port of range) free &&= await listenBriefly(port) !== null
    if (!free || !claim(range)) continue
    for (const port of range) handedOut.add(port)
    return first
  }
}

/** Claims every port of `range` for this process, or none of them. */
function claim (range: number[]): boolean {
  mkdirSync(CLAIMS_DIR, { recursive: true })
  if (!releasingAtExit) process.once('exit', releaseClaims)
  releasingAtExit = true
  const claimed: number[] = []
  for (const port of range) {
    if (!claimPort(port)) {
      for (const taken of claimed) rmSync(join(CLAIMS_DIR, String(taken)), { force: true })
      return false
    }
    claimed.push(port)
  }
  return true
}

/** This process's claims go with it (one it could not remove is taken over once it is gone). */
function releaseClaims (): void {
  for (const port of handedOut) rmSync(join(CLAIMS_DIR, String(port)), { force: true })
}

function claimPort (port: number): boolean {
  const file = join(CLAIMS_DIR, String(port))
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' })
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  const holder = Number(readFileSync(file, 'utf8'))
  if (holder === process.pid || processExists(holder)) return false
  // The claimant is gone: its claim goes with it (a race to take it over is settled by 'wx').
  rmSync(file, { force: true })
  return claimPort(port)
}

function processExists (pid: number): boolean {
  return Number.isInteger(pid) && pid > 0 && existsSync(`/proc/${pid}`)
}

function listenBriefly (port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(null))
    server.listen(port, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : null))
    })
  })
}
