/**
 * The dev stack's and the tests' host watchdog: what `/dev/watchdog` is to a real host, a process
 * of the host's own that the agent does not control (docs/design.md §17).
 *
 * It listens on a Unix socket; every byte written to it is a pet. Armed by the agent's first
 * connection (as a device is by its opening), it fires when `timeoutMs` pass without one: every VMM process under
 * the agent's state directory is SIGKILLed, the way a reset would end them, and again every
 * `CHECK_MS` while no pet comes, so a VMM an adopting agent or a late spawn brings up is ended
 * too. It leaves a mark for the agent to record them fenced (host-agent/store/watchdog-mark.ts).
 * A pet after firing re-arms it. It neither needs nor asks the agent for anything: a frozen or
 * crash-looping agent is what it is for.
 *
 * Time is this process's monotonic clock; a firing is logged with the time since the last pet.
 */
import { rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { findVmmProcesses, killVmmProcesses } from '../supervisor/adoption.js'
import { markWatchdogFired } from '../store/watchdog-mark.js'

/** How often the watchdog checks for a missed pet, and scans for VMMs while it fires. */
const CHECK_MS = 100

export interface WatchdogSettings {
  socketPath: string
  timeoutMs: number
  /** The agent's state directory: its VMM processes are those under `vmms/` there. */
  stateDir: string
}

export class HostWatchdog {
  #lastPet: number | null = null
  #firing = false
  #timer: NodeJS.Timeout | null = null
  #server: Server | null = null
  #scanning = false
  /** The mark of a firing is still to be left, before its first kill. */
  #markPending = false

  constructor (private readonly settings: WatchdogSettings, private readonly log: Logger) {}

  async start (): Promise<void> {
    rmSync(this.settings.socketPath, { force: true })
    const server = createServer((socket) => {
      this.#arm()
      socket.on('data', () => { this.#pet() })
      socket.on('error', () => { socket.destroy() })
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.settings.socketPath, resolve)
    })
    this.#server = server
    this.#timer = setInterval(() => { this.#check() }, CHECK_MS)
    this.log.info({ socket: this.settings.socketPath, timeoutMs: this.settings.timeoutMs }, 'host watchdog listening; armed by the first connection')
  }

  async close (): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer)
    await new Promise<void>((resolve) => { this.#server === null ? resolve() : this.#server.close(() => { resolve() }) })
  }

  /**
   * A connection arms it, as opening a device does; once armed it is not a pet, so an agent that
   * restarts (or crash-loops) does not hold the watchdog off by connecting again.
   */
  #arm (): void {
    if (this.#lastPet !== null) return
    this.log.info('host watchdog armed')
    this.#lastPet = performance.now()
  }

  #pet (): void {
    this.#arm()
    if (this.#firing) this.log.warn('host watchdog petted again: re-armed')
    this.#firing = false
    this.#lastPet = performance.now()
  }

  #check (): void {
    if (this.#lastPet === null) return
    const silentMs = performance.now() - this.#lastPet
    if (silentMs < this.settings.timeoutMs) return
    if (!this.#firing) {
      this.log.error({ silentMs: Math.round(silentMs) }, 'host watchdog fired: no pet in time; fencing the host (every VMM killed)')
      this.#markPending = true
    }
    this.#firing = true
    this.#fence().catch((err: unknown) => { this.log.error({ err }, 'cannot fence the host') })
  }

  /**
   * Kills every VMM of the host. The mark goes first: an agent that sees its VMMs die reads it to
   * record them fenced, not crashed.
   */
  async #fence (): Promise<void> {
    if (this.#scanning) return
    this.#scanning = true
    try {
      if (this.#markPending) {
        await markWatchdogFired(this.settings.stateDir).catch((err: unknown) => { this.log.warn({ err }, 'cannot leave the mark that the watchdog fired') })
        this.#markPending = false
      }
      const vmms = await findVmmProcesses(join(this.settings.stateDir, 'vmms'))
      killVmmProcesses(vmms.values(), 'a VMM process of a host its watchdog fences', this.log)
    } finally {
      this.#scanning = false
    }
  }
}
