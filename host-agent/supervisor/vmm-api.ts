/**
 * A VMM's API as its supervisor (vmm-supervisor.ts) and its migration half (vmm-migration.ts)
 * share it: the Cloud Hypervisor client, and the long call that may hold it.
 *
 * A boot, a reboot and a migration's receive are long calls: Cloud Hypervisor answers nothing
 * else on time while one runs, so the pings and presses of the supervisor skip a held API, and a
 * kill aborts the call holding it. Whoever holds it releases it before it changes the VMM's state,
 * so that a caller who sees the new state can use the API.
 */
import { CloudHypervisorClient } from '../cloud-hypervisor/api-client.js'
import { VmmApiError, VmmUnreachableError } from '../cloud-hypervisor/errors.js'
import type { VmmProcess } from '../process/vmm-process.js'

const READY_POLL_MS = 20
/** How long a call that lost its connection waits to learn whether the process died. */
const EXIT_NOTICE_MS = 1000

export class VmmApi {
  readonly client: CloudHypervisorClient
  readonly #readyTimeoutMs: number
  #longCall: AbortController | null = null

  constructor (
    socketPath: string,
    options: { callTimeoutMs: number, readyTimeoutMs: number },
    /** The VMM's process; null before it is spawned. */
    private readonly process: () => VmmProcess | null
  ) {
    this.client = new CloudHypervisorClient(socketPath, options.callTimeoutMs)
    this.#readyTimeoutMs = options.readyTimeoutMs
  }

  /** Whether a long call holds the API. */
  get held (): boolean {
    return this.#longCall !== null
  }

  /** Marks the API as held by a long call; aborting the controller ends the call. */
  hold (): AbortController {
    this.#longCall = new AbortController()
    return this.#longCall
  }

  /** The API is free again, unless a later call holds it by now. */
  release (abort: AbortController): void {
    if (this.#longCall === abort) this.#longCall = null
  }

  /** Aborts the long call holding the API, if one does (the VMM is killed, or let go). */
  abortHeld (): void {
    this.#longCall?.abort()
  }

  /** Waits until the API answers a ping: a new VMM's socket comes up a little after its process. */
  async waitUntilUp (signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + this.#readyTimeoutMs
    for (;;) {
      try {
        await this.client.ping()
        return
      } catch (err) {
        // Not up yet, or busy: a boot the previous agent started holds the API, and pings that
        // timed out meanwhile may fill its 10 connections (503) until it is done.
        const notYet = err instanceof VmmUnreachableError || (err instanceof VmmApiError && err.status === 503)
        if (!notYet || signal.aborted || !(this.process()?.alive ?? false)) throw err
        if (Date.now() >= deadline) {
          throw new Error(`the VMM API did not come up within ${this.#readyTimeoutMs} ms (${err.message})`)
        }
      }
      await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS))
    }
  }

  /**
   * Whether a call failed because the process died under it. A dead VMM resets the connection
   * before the agent hears of the exit, so a call without an answer waits briefly for the exit.
   */
  async diedDuring (err: unknown): Promise<boolean> {
    const vmmProcess = this.process()
    if (vmmProcess === null) return true
    if (err instanceof VmmUnreachableError) await vmmProcess.waitForExit(EXIT_NOTICE_MS)
    return !vmmProcess.alive
  }

  close (): void {
    this.client.close()
  }
}
