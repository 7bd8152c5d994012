/**
 * Reading Cloud Hypervisor's event-monitor file.
 *
 * The format is not NDJSON: every event is a pretty-printed JSON object followed by a blank
 * line, so the stream splits on "\n\n" (as the Cloud Hypervisor integration tests do). The
 * writer is another process the agent does not trust: a chunk may be partial (the VMM writes
 * without blocking and ignores errors), may be garbage, or garbage may run into the next event.
 * The parser therefore keeps an unfinished tail for the next read, reports what it cannot
 * parse instead of throwing, resynchronises on the next object that starts like an event, and
 * drops an unterminated tail that grows past a bound.
 *
 * `EventFileTail` follows a live file with inotify (`fs.watch`): no polling while nothing is
 * written. `readEventFile` reads the end of the file of a VMM that is already gone. Both may start
 * at an offset the agent took earlier with `eventFileSize`: each event is one `write()` of the
 * VMM's, so a size read between writes falls on an event's boundary.
 */
import { EventEmitter } from 'node:events'
import { watch, type FSWatcher } from 'node:fs'
import { open, stat } from 'node:fs/promises'
import { StringDecoder } from 'node:string_decoder'

export interface VmmEvent {
  timestamp: { secs: number, nanos: number }
  source: string
  event: string
  properties: Record<string, string> | null
}

const SEPARATOR = '\n\n'
const EVENT_START = '{\n  "timestamp"'
/** An unterminated tail larger than this is garbage, not an event still being written. */
const MAX_PENDING_CHARS = 64 * 1024

function asEvent (value: unknown): VmmEvent | null {
  if (typeof value !== 'object' || value === null) return null
  const candidate = value as Partial<VmmEvent>
  if (typeof candidate.source !== 'string' || typeof candidate.event !== 'string') return null
  const properties = typeof candidate.properties === 'object' ? candidate.properties : null
  const timestamp = typeof candidate.timestamp === 'object' && candidate.timestamp !== null
    ? candidate.timestamp
    : { secs: 0, nanos: 0 }
  return { timestamp, source: candidate.source, event: candidate.event, properties }
}

function parseObject (text: string): VmmEvent | null {
  try {
    return asEvent(JSON.parse(text))
  } catch {
    return null
  }
}

export interface ParsedChunk {
  events: VmmEvent[]
  /** Text that was not an event; the caller logs it. */
  garbage: string[]
}

/** Splits a growing event stream into events; feed it text as it arrives. */
export class EventStreamParser {
  #pending = ''

  push (text: string): ParsedChunk {
    const result: ParsedChunk = { events: [], garbage: [] }
    const parts = (this.#pending + text).split(SEPARATOR)
    this.#pending = parts.pop() ?? ''
    for (const part of parts) this.#parsePart(part, result)
    if (this.#pending.length > MAX_PENDING_CHARS) {
      result.garbage.push(this.#pending)
      this.#pending = ''
    }
    return result
  }

  /** Whatever is left when the stream is known to be complete. */
  finish (): ParsedChunk {
    const result: ParsedChunk = { events: [], garbage: [] }
    this.#parsePart(this.#pending, result)
    this.#pending = ''
    return result
  }

  #parsePart (part: string, result: ParsedChunk): void {
    if (part.trim() === '') return
    const event = parseObject(part)
    if (event !== null) {
      result.events.push(event)
      return
    }
    // Garbage that ran into an event: keep the event that starts after it.
    const start = part.lastIndexOf(EVENT_START)
    const recovered = start > 0 ? parseObject(part.slice(start)) : null
    if (recovered === null) {
      result.garbage.push(part)
      return
    }
    result.garbage.push(part.slice(0, start))
    result.events.push(recovered)
  }
}

/** A file read whole is read from this far before its end at most: its end is what matters. */
const MAX_FILE_READ_BYTES = 1024 * 1024

/**
 * The events of a file the VMM no longer writes, from `from` (its last MiB at most), and whether
 * it ends with the VMM's own clean exit.
 */
export async function readEventFile (path: string, from = 0): Promise<{ events: VmmEvent[], endsWithVmmShutdown: boolean }> {
  let text: string
  try {
    text = await readEnd(path, from)
  } catch {
    return { events: [], endsWithVmmShutdown: false }
  }
  const parser = new EventStreamParser()
  const events = [...parser.push(text).events, ...parser.finish().events]
  const last = events.at(-1)
  return { events, endsWithVmmShutdown: last?.source === 'vmm' && last.event === 'shutdown' }
}

/** The size of an event file now: where the events written from now on begin (0 if there is none). */
export async function eventFileSize (path: string): Promise<number> {
  try {
    return (await stat(path)).size
  } catch {
    return 0
  }
}

async function readEnd (path: string, from: number): Promise<string> {
  const handle = await open(path, 'r')
  try {
    const { size } = await handle.stat()
    const start = Math.min(size, Math.max(from, size - MAX_FILE_READ_BYTES))
    const buffer = Buffer.alloc(size - start)
    await handle.read(buffer, 0, buffer.length, start)
    const text = buffer.toString('utf8')
    // Cut to its last MiB, the text starts in the middle of an event: skip to the next boundary.
    return start === from ? text : text.slice(text.indexOf(SEPARATOR) + SEPARATOR.length)
  } finally {
    await handle.close()
  }
}

export interface EventFileTailEvents {
  event: [VmmEvent]
  garbage: [string]
  unreadable: [Error]
}

/**
 * Follows an event file as the VMM appends to it. Emits `event` for each event, `garbage` for
 * text that is not one, and `unreadable` when the file cannot be read (the tail keeps going).
 */
export class EventFileTail extends EventEmitter<EventFileTailEvents> {
  readonly #parser = new EventStreamParser()
  readonly #decoder = new StringDecoder('utf8')
  #offset = 0
  #watcher: FSWatcher | null = null
  #reading: Promise<void> | null = null
  #again = false
  #stopped = false

  constructor (readonly path: string) {
    super()
  }

  /** Starts following at `from`: a byte offset, or `end` to skip what the file already holds. */
  async start (from: number | 'end'): Promise<void> {
    if (from === 'end') {
      const handle = await open(this.path, 'r')
      try {
        this.#offset = (await handle.stat()).size
      } finally {
        await handle.close()
      }
    } else {
      this.#offset = from
    }
    this.#watcher = watch(this.path, { persistent: false }, () => { this.#readMore() })
    this.#watcher.on('error', (err) => { this.emit('unreadable', err) })
    this.#readMore()
  }

  /** Resolves once everything written so far has been read and emitted. */
  async catchUp (): Promise<void> {
    while (this.#reading !== null) await this.#reading
    this.#readMore()
    while (this.#reading !== null) await this.#reading
  }

  stop (): void {
    this.#stopped = true
    this.#watcher?.close()
    this.#watcher = null
  }

  #readMore (): void {
    if (this.#stopped) return
    if (this.#reading !== null) {
      this.#again = true
      return
    }
    this.#reading = this.#readToEnd()
      .catch((err: Error) => { this.emit('unreadable', err) })
      .finally(() => {
        this.#reading = null
        if (this.#again) {
          this.#again = false
          this.#readMore()
        }
      })
  }

  async #readToEnd (): Promise<void> {
    const handle = await open(this.path, 'r')
    try {
      const { size } = await handle.stat()
      if (size < this.#offset) this.#offset = 0 // truncated: a new VMM process started over
      const buffer = Buffer.alloc(16 * 1024)
      while (!this.#stopped) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.#offset)
        if (bytesRead === 0) break
        this.#offset += bytesRead
        const { events, garbage } = this.#parser.push(this.#decoder.write(buffer.subarray(0, bytesRead)))
        for (const text of garbage) this.emit('garbage', text)
        for (const event of events) this.emit('event', event)
      }
    } finally {
      await handle.close()
    }
  }
}
