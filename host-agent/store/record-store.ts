/**
 * The VMM records on disk: `<stateDir>/vmms/<vmmId>/record.json`, one directory per VMM that
 * also holds the VMM's socket, event file and logs.
 *
 * Writes are atomic and durable: the new content goes to a temporary file that is fsynced and
 * renamed over the record, then the directory is fsynced, so after a crash the record is either
 * the old one or the new one, never a torn mix. Writes of one record are queued in order, so a
 * slow write can never land after a newer one.
 */
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { agentVmmRecordSchema, type AgentVmmRecord } from './record.js'

const RECORD_FILE = 'record.json'

async function fsyncPath (path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

let temporaryFileCounter = 0

export async function writeFileAtomic (dir: string, name: string, data: string): Promise<void> {
  const temporary = join(dir, `.${name}.${process.pid}.${temporaryFileCounter++}.tmp`)
  const handle = await open(temporary, 'w', 0o600)
  try {
    await handle.writeFile(data)
    await handle.sync()
  } finally {
    await handle.close()
  }
  try {
    await rename(temporary, join(dir, name))
  } catch (err) {
    await unlink(temporary).catch(() => {})
    throw err
  }
  await fsyncPath(dir)
}

export interface LoadedRecords {
  records: AgentVmmRecord[]
  /**
   * VMM directories with a record that cannot be read, with the reason. (A directory without
   * any record is left out: nothing was ever spawned there, the record comes first.)
   */
  unreadable: Array<{ id: string, problem: string }>
}

export class RecordStore {
  readonly vmmsDir: string
  /**
   * IDs destroyed before this agent ever had a record of them (a delete that overtook its
   * create): an empty file each, so a late ensure of the ID is refused like any tombstone's.
   */
  readonly fencedDir: string
  readonly #queues = new Map<string, Promise<void>>()

  constructor (stateDir: string) {
    this.vmmsDir = join(stateDir, 'vmms')
    this.fencedDir = join(stateDir, 'fenced')
  }

  dirOf (id: string): string {
    return join(this.vmmsDir, id)
  }

  async init (): Promise<void> {
    await mkdir(this.vmmsDir, { recursive: true, mode: 0o700 })
    await mkdir(this.fencedDir, { recursive: true, mode: 0o700 })
  }

  /** Records, durably, that the ID must never get a VMM. */
  async fence (id: string): Promise<void> {
    await writeFileAtomic(this.fencedDir, id, '')
  }

  async isFenced (id: string): Promise<boolean> {
    return await stat(join(this.fencedDir, id)).then(() => true, () => false)
  }

  /** Removes fences written before `before` (ms since the epoch). */
  async purgeFences (before: number): Promise<void> {
    for (const id of await readdir(this.fencedDir)) {
      const written = await stat(join(this.fencedDir, id)).then((s) => s.mtimeMs, () => Infinity)
      if (written < before) await unlink(join(this.fencedDir, id)).catch(() => {})
    }
  }

  /** Creates a VMM's directory and makes its entry durable before the first record lands. */
  async createDir (id: string): Promise<void> {
    await mkdir(this.dirOf(id), { recursive: true, mode: 0o700 })
    await fsyncPath(this.vmmsDir)
  }

  /** Persists a snapshot of the record as it is now; resolves once it is durable. */
  async save (record: AgentVmmRecord): Promise<void> {
    const data = JSON.stringify(record, null, 2) + '\n'
    const previous = this.#queues.get(record.id) ?? Promise.resolve()
    const write = previous.catch(() => {}).then(() => writeFileAtomic(this.dirOf(record.id), RECORD_FILE, data))
    this.#queues.set(record.id, write)
    try {
      await write
    } finally {
      if (this.#queues.get(record.id) === write) this.#queues.delete(record.id)
    }
  }

  async loadAll (): Promise<LoadedRecords> {
    const result: LoadedRecords = { records: [], unreadable: [] }
    const entries = await readdir(this.vmmsDir, { withFileTypes: true })
    for (const entry of entries.filter((e) => e.isDirectory())) {
      try {
        const text = await readFile(join(this.vmmsDir, entry.name, RECORD_FILE), 'utf8')
        const record = agentVmmRecordSchema.parse(JSON.parse(text))
        if (record.id !== entry.name) throw new Error(`record names VMM ${record.id}`)
        result.records.push(record)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue
        result.unreadable.push({ id: entry.name, problem: (err as Error).message })
      }
    }
    return result
  }

  /** Forgets a VMM entirely: its record, logs and leftovers. */
  async remove (id: string): Promise<void> {
    await rm(this.dirOf(id), { recursive: true, force: true })
    await fsyncPath(this.vmmsDir)
  }
}
