/**
 * One VMM's serial console, relayed by the agent.
 *
 * Cloud Hypervisor serves the serial port on a Unix socket (mode Socket) to one client at a
 * time, and buffers what the guest prints while none is connected. The agent is that client for
 * the VMM's whole life: it connects once the VM is created (and again after an agent restart),
 * appends everything the guest prints to `serial.log`, and hands it to every interactive
 * session attached (the API's WebSocket relay). What a session types goes to the guest.
 *
 * The log is capped: once it passes twice the cap, it is cut to its last `capBytes`, so a chatty
 * guest costs a bounded amount of disk.
 */
import { EventEmitter } from 'node:events'
import { open, rename, stat, type FileHandle } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import type { Logger } from 'pino'

const RECONNECT_MS = 200

export interface SerialConsoleEvents {
  output: [Buffer]
}

export class SerialConsole extends EventEmitter<SerialConsoleEvents> {
  #socket: Socket | null = null
  #log: FileHandle | null = null
  #size = 0
  #writes: Promise<void> = Promise.resolve()
  #stopped = false
  #timer: NodeJS.Timeout | null = null

  constructor (
    private readonly socketPath: string,
    private readonly logPath: string,
    private readonly capBytes: number,
    private readonly log: Logger
  ) {
    super()
  }

  /** Connects to the VMM's serial socket, and keeps connecting until `stop`. */
  start (): void {
    // One connection at most: two would take the VMM's one client place from each other in turn.
    if (this.#socket !== null || this.#timer !== null || this.#stopped) return
    this.#connect()
  }

  /** What an interactive session typed; dropped while the VMM's socket is not connected. */
  write (data: Buffer): boolean {
    if (this.#socket === null || this.#socket.connecting) return false
    this.#socket.write(data)
    return true
  }

  /** Stops relaying; what was logged stays. */
  async stop (): Promise<void> {
    this.#stopped = true
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#socket?.destroy()
    this.#socket = null
    await this.#writes
    await this.#log?.close()
    this.#log = null
  }

  #connect (): void {
    const socket = connect(this.socketPath)
    this.#socket = socket
    socket.on('data', (chunk: Buffer) => {
      this.emit('output', chunk)
      this.#append(chunk)
    })
    socket.on('error', () => {})
    socket.on('close', () => {
      if (this.#socket === socket) this.#socket = null
      if (this.#stopped) return
      this.#timer = setTimeout(() => { this.#timer = null; this.start() }, RECONNECT_MS)
      this.#timer.unref()
    })
  }

  #append (chunk: Buffer): void {
    this.#writes = this.#writes.then(async () => {
      if (this.#log === null) {
        this.#log = await open(this.logPath, 'a', 0o600)
        this.#size = (await stat(this.logPath)).size
      }
      await this.#log.write(chunk)
      this.#size += chunk.length
      if (this.#size > 2 * this.capBytes) await this.#cut()
    }).catch((err: Error) => { this.log.warn({ err: err.message }, 'cannot write the serial log') })
  }

  /** Keeps the last `capBytes` of the log. */
  async #cut (): Promise<void> {
    await this.#log?.close()
    this.#log = null
    const tail = await readTail(this.logPath, this.capBytes)
    const cut = await open(`${this.logPath}.cut`, 'w', 0o600)
    await cut.write(tail)
    await cut.close()
    await rename(`${this.logPath}.cut`, this.logPath)
    this.#size = tail.length
  }
}

/** The last `bytes` of a file (all of it if it is shorter); empty if there is none. */
export async function readTail (path: string, bytes: number): Promise<Buffer> {
  let file: FileHandle
  try {
    file = await open(path, 'r')
  } catch {
    return Buffer.alloc(0)
  }
  try {
    const { size } = await file.stat()
    const length = Math.min(size, bytes)
    const buffer = Buffer.alloc(length)
    await file.read(buffer, 0, length, size - length)
    return buffer
  } finally {
    await file.close()
  }
}
