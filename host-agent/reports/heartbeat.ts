/**
 * The host's heartbeat: every `heartbeatMs`, the agent announces itself to the host's monitor
 * workflow (which also registers the host on first contact), with what it has now: its capacity,
 * its storage and its base images. A heartbeat that fails is logged and the next one tries again;
 * one in flight is never doubled up.
 */
import type { Logger } from 'pino'
import type { HostAnnouncement } from '../../domain/host.js'

export class Heartbeat {
  #timer: NodeJS.Timeout | null = null
  #inFlight = false
  #failing = false

  constructor (
    private readonly announce: () => Promise<HostAnnouncement>,
    private readonly intervalMs: number,
    private readonly send: (announcement: HostAnnouncement) => Promise<void>,
    private readonly log: Logger
  ) {}

  start (): void {
    this.#beat()
    this.#timer = setInterval(() => { this.#beat() }, this.intervalMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  #beat (): void {
    if (this.#inFlight) return
    this.#inFlight = true
    this.announce()
      .then(async (announcement) => { await this.send(announcement) })
      .then(() => {
        if (this.#failing) this.log.info('heartbeat accepted again')
        this.#failing = false
      }, (err: Error) => {
        // Say it once per outage, not once per beat.
        if (!this.#failing) this.log.warn({ err: err.message }, 'heartbeat not sent or not accepted by Temporal; retrying every beat')
        this.#failing = true
      })
      .finally(() => { this.#inFlight = false })
  }
}
