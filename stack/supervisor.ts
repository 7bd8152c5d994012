/**
 * Runs the stack's processes the way a service manager does.
 *
 * Each component is one child process, started in a process group of its own: a Ctrl-C on the
 * terminal then reaches the stack alone, which stops the components in order (clients before
 * servers) instead of all at once. A process that exits while the stack is not stopping is
 * logged with its exit code or signal and started again after a delay: 250 ms, doubling with each
 * quick failure up to 10 s, back to 250 ms once it had stayed up for 30 s. `run/<name>.pid` always
 * holds the PID of the process running now (see pid-files.ts).
 *
 * Once a component's process has ended, whatever it left behind is killed before it starts
 * again, as systemd does with a unit's control group: what runs in its process group, and what
 * runs in its working directory (`workDir`). PostgreSQL's backends outlive a killed postmaster by
 * a moment, each in a session of its own but all in the cluster's directory, and a new postmaster
 * started beside them refuses to start (their shared memory is "still in use"). The VMMs the host
 * agents start are in sessions and directories of their own, and outlive the agents.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { realpath } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import type { ComponentOutput, StackOutput } from './output.js'
import { removePidFile, writePidFile } from './pid-files.js'
import { killLeftovers } from './processes.js'

export interface ComponentSpec {
  name: string
  command: string
  args: readonly string[]
  env: NodeJS.ProcessEnv
  /** Run as this user and group (PostgreSQL refuses to run as root). */
  uid?: number
  gid?: number
  /** How to ask it to stop; PostgreSQL wants SIGINT (fast shutdown: SIGTERM waits for clients). */
  stopSignal?: NodeJS.Signals
  /**
   * The directory its processes work in, when none of anything else's do (PostgreSQL's cluster):
   * a process left running there after the component's own ended is a leftover of it.
   */
  workDir?: string
  /**
   * Waited for before each restart: a component it cannot start without (PostgreSQL, for
   * Temporal's server), which the stack's first start waits for in its order. Started without
   * it, the component exits at once, and its log shows a crash where there was only a restart.
   * A wait that fails (it timed out) starts the component anyway.
   */
  restartsAfter?: (signal: AbortSignal) => Promise<void>
}

// Quick the first time, as service managers are: a stop in flight waits for a killed worker.
const FIRST_RESTART_DELAY_MS = 250
const STABLE_UPTIME_MS = 30_000
/** How long the leftovers of an ended process may take to die after SIGKILL. */
const LEFTOVERS_TIMEOUT_MS = 5_000
/** How long a component may take to stop before it is killed. */
export const STOP_TIMEOUT_MS = 10_000

/**
 * The wait before the next restart, given the one before (null: none yet), the uptime and the
 * longest wait (the stack's VMPLANE_MAX_RESTART_DELAY_MS).
 */
export function restartDelay (previousDelayMs: number | null, uptimeMs: number, maxDelayMs: number): number {
  if (previousDelayMs === null || uptimeMs >= STABLE_UPTIME_MS) return FIRST_RESTART_DELAY_MS
  return Math.min(previousDelayMs * 2, maxDelayMs)
}

class SupervisedProcess {
  private child: ChildProcess | null = null
  private exited: Promise<void> = Promise.resolve()
  private startedAt = 0
  private lastDelayMs: number | null = null
  private restartTimer: NodeJS.Timeout | null = null
  private stopping = false
  /** Aborted by a stop: ends a wait for `restartsAfter`. */
  private readonly stopped = new AbortController()

  constructor (
    readonly spec: ComponentSpec,
    private readonly runDir: string,
    private readonly output: ComponentOutput,
    private readonly maxRestartDelayMs: number
  ) {}

  get pid (): number | null {
    return this.child?.pid ?? null
  }

  start (): void {
    const { spec } = this
    const child = spawn(spec.command, spec.args, {
      cwd: REPO_ROOT,
      env: spec.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      uid: spec.uid,
      gid: spec.gid
    })
    this.child = child
    this.startedAt = Date.now()
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.onExit(code === null ? `signal ${signal}` : `exit code ${code}`)
        this.killLeftoversOf(child.pid!).then(resolve, resolve)
      })
      child.once('error', (error) => {
        // A process that could not be spawned at all (ENOENT, EACCES) emits no 'exit'.
        if (child.pid !== undefined) return
        this.onExit(`failure to start: ${error.message}`)
        resolve()
      })
    })
    if (child.pid === undefined) return
    writePidFile(this.runDir, spec.name, child.pid)
    this.output.pipeFrom(child.stdout!)
    this.output.pipeFrom(child.stderr!)
    this.output.note(`started (pid ${child.pid})`)
  }

  /** What the ended process `pid` left: its process group (it led one: `detached`), and what works in `workDir`. */
  private async killLeftoversOf (pid: number): Promise<void> {
    const workDir = this.spec.workDir === undefined ? null : await realpath(this.spec.workDir).catch(() => null)
    await killLeftovers({ group: pid, workDir }, LEFTOVERS_TIMEOUT_MS)
  }

  private onExit (how: string): void {
    this.child = null
    removePidFile(this.runDir, this.spec.name)
    if (this.stopping) {
      this.output.note(`stopped (${how})`)
      return
    }
    const uptimeMs = Date.now() - this.startedAt
    const delayMs = restartDelay(this.lastDelayMs, uptimeMs, this.maxRestartDelayMs)
    this.lastDelayMs = delayMs
    this.output.note(`exited with ${how} after ${formatSeconds(uptimeMs)}; restarting in ${formatSeconds(delayMs)}`)
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null
      this.restart().catch(() => {})
    }, delayMs)
  }

  private async restart (): Promise<void> {
    await this.exited
    if (this.spec.restartsAfter !== undefined) {
      this.output.note('waiting for what it needs to start')
      await this.spec.restartsAfter(this.stopped.signal).catch(() => {})
    }
    if (!this.stopping) this.start()
  }

  /** Asks the process to stop, kills it if it has not after STOP_TIMEOUT_MS; no more restarts. */
  async stop (): Promise<void> {
    this.stopping = true
    this.stopped.abort()
    if (this.restartTimer !== null) clearTimeout(this.restartTimer)
    const child = this.child
    if (child === null) return
    child.kill(this.spec.stopSignal ?? 'SIGTERM')
    const timeout = sleep(STOP_TIMEOUT_MS, 'timeout', { ref: false })
    if (await Promise.race([this.exited, timeout]) === 'timeout') {
      this.output.note(`did not stop within ${formatSeconds(STOP_TIMEOUT_MS)}; killing it`)
      child.kill('SIGKILL')
      await this.exited
    }
  }

  /** Kills the process now; no more restarts. */
  async kill (): Promise<void> {
    this.stopping = true
    this.stopped.abort()
    if (this.restartTimer !== null) clearTimeout(this.restartTimer)
    this.child?.kill('SIGKILL')
    await this.exited
  }
}

function formatSeconds (ms: number): string {
  return `${Math.round(ms / 100) / 10} s`
}

export class Supervisor {
  private readonly processes = new Map<string, SupervisedProcess>()

  constructor (
    private readonly runDir: string,
    private readonly output: StackOutput,
    private readonly maxRestartDelayMs: number
  ) {}

  /** Starts a component and keeps it running until it is stopped. */
  start (spec: ComponentSpec): void {
    if (this.processes.has(spec.name)) throw new Error(`component ${spec.name} is already supervised`)
    const supervised = new SupervisedProcess(spec, this.runDir, this.output.component(spec.name), this.maxRestartDelayMs)
    this.processes.set(spec.name, supervised)
    supervised.start()
  }

  /** The PID of the component's current process, null while it is down. */
  pid (name: string): number | null {
    return this.processes.get(name)?.pid ?? null
  }

  /** Stops these components together; resolves once every one of them has exited. */
  async stop (names: readonly string[]): Promise<void> {
    await Promise.all(names.map((name) => this.processes.get(name)?.stop()))
  }

  /** Kills every component at once. */
  async killAll (): Promise<void> {
    await Promise.all([...this.processes.values()].map((supervised) => supervised.kill()))
  }
}
