/**
 * A running VMM process, whether this agent spawned it or adopted it after a restart.
 *
 * - Spawned: the agent is the parent, so the child's `exit` event gives the exit code or
 *   signal, and until that event the PID cannot be reused (the child is not reaped yet).
 * - Adopted: the process was started by an earlier agent and now belongs to init. Its end is
 *   seen by polling /proc/<pid>/stat and comparing the start time (never the PID alone); how it
 *   ended is unknown.
 *
 * `killGroup` sends SIGKILL to the process group only while the group leader is provably the
 * same process, so a reused PID is never killed; `signalGroup` does the same for the signals that
 * freeze and thaw it (SIGSTOP, SIGCONT).
 */
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { launchVmm, type VmmPaths } from '../cloud-hypervisor/launch.js'
import { isRunning, startTimeOf, type ProcessIdentity } from './proc.js'

export type ExitObservation =
  | { known: true, code: number | null, signal: string | null }
  | { known: false }

/** How often an adopted process is checked while a kill waits for it. */
const KILL_POLL_MS = 20

export class VmmProcess {
  readonly exited: Promise<ExitObservation>
  #exit: ExitObservation | null = null
  #resolveExit!: (exit: ExitObservation) => void
  #pollTimer: NodeJS.Timeout | null = null

  private constructor (
    readonly pid: number,
    readonly startTime: string | null,
    private readonly child: ChildProcess | null
  ) {
    this.exited = new Promise((resolve) => { this.#resolveExit = resolve })
  }

  /** Spawns a VMM; rejects when the binary cannot be started at all. */
  static async spawn (binary: string, paths: VmmPaths, prefix: readonly string[]): Promise<VmmProcess> {
    const child = launchVmm(binary, paths, prefix)
    await Promise.race([once(child, 'spawn'), once(child, 'error').then(([err]) => { throw err })])
    const pid = child.pid!
    const vmmProcess = new VmmProcess(pid, startTimeOf(pid), child)
    if (child.exitCode !== null || child.signalCode !== null) {
      vmmProcess.#settle({ known: true, code: child.exitCode, signal: child.signalCode })
    } else {
      child.once('exit', (code, signal) => { vmmProcess.#settle({ known: true, code, signal }) })
    }
    return vmmProcess
  }

  /** Watches a process an earlier agent started; the caller checked that it runs. */
  static adopt (identity: ProcessIdentity, pollMs: number): VmmProcess {
    const vmmProcess = new VmmProcess(identity.pid, identity.startTime, null)
    vmmProcess.#pollEvery(pollMs)
    return vmmProcess
  }

  get alive (): boolean {
    if (this.#exit !== null) return false
    if (this.child !== null) return true
    this.#poll()
    return this.#exit === null
  }

  /** SIGKILL to the VMM's process group; false when the process is already gone. */
  killGroup (): boolean {
    if (!this.signalGroup('SIGKILL')) return false
    // An adopted process's end is seen only by polling: look often now that it is due.
    if (this.child === null) this.#pollEvery(KILL_POLL_MS)
    return true
  }

  /** A signal to the VMM's process group; false when the process is already gone. */
  signalGroup (signal: 'SIGKILL' | 'SIGSTOP' | 'SIGCONT'): boolean {
    if (!this.alive) return false
    if (this.child === null && this.startTime === null) return false
    try {
      process.kill(-this.pid, signal)
    } catch {
      return false
    }
    return true
  }

  /** Waits for the exit, at most `timeoutMs`; null if the process still runs then. */
  async waitForExit (timeoutMs: number): Promise<ExitObservation | null> {
    const deadline = Date.now() + timeoutMs
    if (this.child !== null) {
      const timeout = sleep(timeoutMs, null, { ref: false })
      return await Promise.race([this.exited, timeout])
    }
    while (this.alive) {
      if (Date.now() >= deadline) return null
      await sleep(KILL_POLL_MS)
    }
    return this.#exit
  }

  /** Stops watching without touching the process (the agent is shutting down). */
  release (): void {
    if (this.#pollTimer !== null) clearInterval(this.#pollTimer)
    this.#pollTimer = null
  }

  #pollEvery (ms: number): void {
    this.release()
    this.#pollTimer = setInterval(() => { this.#poll() }, ms)
    this.#pollTimer.unref()
  }

  #poll (): void {
    if (this.#exit !== null || this.startTime === null) return
    if (!isRunning({ pid: this.pid, startTime: this.startTime })) this.#settle({ known: false })
  }

  #settle (exit: ExitObservation): void {
    if (this.#exit !== null) return
    this.#exit = exit
    this.release()
    this.#resolveExit(exit)
  }
}
