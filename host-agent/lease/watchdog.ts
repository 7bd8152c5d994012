/**
 * The host's watchdog, as the agent pets it (`VMPLANE_AGENT_WATCHDOG`, docs/design.md §17):
 *
 * - a device (`/dev/watchdog`: the kernel's softdog or a hardware one): opened once, which arms
 *   it, and written a byte at every pet; the machine resets when the writes stop. It is never
 *   closed with the magic 'V', so the agent's death does not disarm it.
 * - `unix:<socket>`: the dev stack's and the tests' watchdog process of the host's own
 *   (host-agent/watchdog/), which kills the host's VMMs when the writes stop; the agent
 *   connects, and writes a byte at every pet, connecting again when the connection is gone.
 *
 * A pet that cannot be delivered is logged once; the watchdog then fires, which is the point.
 */
import { openSync, writeSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import type { Logger } from 'pino'

export interface Watchdog {
  /** Arms the watchdog (the agent's start): from now on, it fires unless petted in time. */
  arm: () => void
  pet: () => void
}

export function openWatchdog (target: string, log: Logger): Watchdog {
  const unix = /^unix:(.+)$/.exec(target)
  return unix === null ? new DeviceWatchdog(target, log) : new SocketWatchdog(unix[1]!, log)
}

class DeviceWatchdog implements Watchdog {
  #fd: number | null = null
  #failing = false

  constructor (private readonly path: string, private readonly log: Logger) {}

  arm (): void {
    try {
      this.#fd ??= openSync(this.path, 'w')
    } catch (err) {
      this.log.error({ err, watchdog: this.path }, 'cannot open the host watchdog')
    }
  }

  pet (): void {
    try {
      this.#fd ??= openSync(this.path, 'w')
      writeSync(this.#fd, '.')
      this.#failing = false
    } catch (err) {
      if (!this.#failing) this.log.error({ err, watchdog: this.path }, 'cannot pet the host watchdog: it will fence the host')
      this.#failing = true
    }
  }
}

class SocketWatchdog implements Watchdog {
  #socket: Socket | null = null
  #failing = false

  constructor (private readonly path: string, private readonly log: Logger) {}

  arm (): void {
    this.#socket = this.#connect()
  }

  pet (): void {
    if (this.#socket === null || this.#socket.destroyed) this.#socket = this.#connect()
    this.#socket.write('.')
  }

  #connect (): Socket {
    const socket = connect(this.path)
    socket.unref()
    socket.on('connect', () => {
      if (this.#failing) this.log.info({ watchdog: this.path }, 'host watchdog reachable again')
      this.#failing = false
    })
    socket.on('error', (err) => {
      if (!this.#failing) this.log.error({ err, watchdog: this.path }, 'cannot pet the host watchdog: it will fence the host')
      this.#failing = true
      socket.destroy()
    })
    return socket
  }
}
