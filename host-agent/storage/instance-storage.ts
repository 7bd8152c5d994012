/**
 * Instance storage: disks and cloud-init seeds in the storage directory.
 *
 * Theory of operation
 *
 * The storage directory is at the same path on every host (shared storage: NFS, a cluster
 * filesystem; in the dev stack, one directory all simulated hosts use), so an instance may
 * start on any host and Cloud Hypervisor's migration finds its disks at the paths its config
 * names (docs/design.md §14). Everything in it is named by the ID of the decision that made it:
 *
 *   disks/<diskId>.qcow2   a boot disk: a qcow2 overlay of an imported base image
 *   disks/<diskId>.raw     a data disk: empty, sparse
 *   seeds/<instanceId>.img the instance's NoCloud seed (cloud-init-seed.ts)
 *   images/<sha256>.<fmt>  base images imported from a host's image directory, by content: the
 *                          overlays' backing files, the same on every host and never changed
 *   partial/<host>.<uuid>  files being made, by which host; each is linked into place once complete
 *
 * Making is idempotent and atomic: a file that exists is complete and is used as it is; a new
 * one is made under `partial/` and linked into place, so a crash leaves at most a partial
 * file, never a half-made disk in use. A restarted agent removes its own partial files (none of
 * them can be in progress); the reconciler reaps any other after the orphan grace (a host that
 * never came back).
 * Removing is idempotent too. The control plane removes an instance's disks and seed only once
 * the instance is deleted and every VMM of it is confirmed gone.
 */
import { randomUUID } from 'node:crypto'
import { constants } from 'node:fs'
import { copyFile, link, mkdir, readdir, rm, stat, statfs } from 'node:fs/promises'
import { join } from 'node:path'
import type { CloudInit, StorageListing, VmmDisk, VmmInterface } from '../../domain/host-agent-api.js'
import { diskFileOf, seedFileOf } from '../../domain/storage.js'
import { crashPoint } from '../../faults/crash-points.js'
import type { ResolvedDisk } from '../cloud-hypervisor/vm-config.js'
import type { ImageResolver } from '../images.js'
import { buildSeed } from './cloud-init-seed.js'
import { createOverlay, createRaw } from './qemu-img.js'

const GIB = 1024 ** 3

type StoredFile = StorageListing['partial'][number]

const DISK_FILE = /^([0-9a-f-]{36})\.(qcow2|raw)$/
const SEED_FILE = /^([0-9a-f-]{36})\.img$/

export class InstanceStorage {
  readonly disksDir: string
  readonly seedsDir: string
  readonly imagesDir: string
  readonly partialDir: string

  constructor (readonly dir: string, private readonly hostId: string, private readonly images: ImageResolver) {
    this.disksDir = join(dir, 'disks')
    this.seedsDir = join(dir, 'seeds')
    this.imagesDir = join(dir, 'images')
    this.partialDir = join(dir, 'partial')
  }

  /** Makes the directories, and removes the files this host left half-made when it last stopped. */
  async init (): Promise<void> {
    for (const sub of [this.disksDir, this.seedsDir, this.imagesDir, this.partialDir]) await mkdir(sub, { recursive: true, mode: 0o700 })
    for (const file of await listFiles(this.partialDir)) {
      if (file.name.startsWith(`${this.hostId}.`)) await rm(join(this.partialDir, file.name), { force: true })
    }
  }

  /** The size of the filesystem the storage directory is on, in whole GiB. */
  async capacityGiB (): Promise<number> {
    const { blocks, bsize } = await statfs(this.dir)
    return Math.floor(blocks * bsize / GIB)
  }

  diskPath (disk: VmmDisk): string {
    return join(this.dir, diskFileOf(disk))
  }

  seedPath (instanceId: string): string {
    return join(this.dir, seedFileOf(instanceId))
  }

  async hasDisk (disk: VmmDisk): Promise<boolean> {
    return await exists(this.diskPath(disk))
  }

  async hasSeed (instanceId: string): Promise<boolean> {
    return await exists(this.seedPath(instanceId))
  }

  /** The disk, made if it is missing. */
  async ensureDisk (disk: VmmDisk): Promise<ResolvedDisk> {
    const path = this.diskPath(disk)
    const prepared: ResolvedDisk = { path, imageType: disk.image === undefined ? 'Raw' : 'Qcow2', readonly: false }
    if (await this.hasDisk(disk)) return prepared
    const sizeBytes = disk.sizeGiB * GIB
    if (disk.image === undefined) {
      await this.#make(path, async (partial) => { await createRaw(partial, sizeBytes) })
    } else {
      const base = await this.#importBase(disk.image)
      await this.#make(path, async (partial) => { await createOverlay(partial, base.path, base.format, sizeBytes) })
    }
    crashPoint('agent.disk.after-create')
    return prepared
  }

  /** The instance's seed, made if it is missing; read-only to the guest. */
  async ensureSeed (instanceId: string, cloudInit: CloudInit, interfaces: readonly VmmInterface[]): Promise<ResolvedDisk> {
    const path = this.seedPath(instanceId)
    if (!await this.hasSeed(instanceId)) {
      await this.#make(path, async (partial) => { await buildSeed(partial, instanceId, cloudInit, interfaces) })
    }
    return { path, imageType: 'Raw', readonly: true }
  }

  /** Removes a disk; false when there was none. */
  async removeDisk (diskId: string): Promise<boolean> {
    let removed = false
    for (const ext of ['qcow2', 'raw']) removed = await removeFile(join(this.disksDir, `${diskId}.${ext}`)) || removed
    return removed
  }

  async removeSeed (instanceId: string): Promise<boolean> {
    return await removeFile(this.seedPath(instanceId))
  }

  async removePartial (name: string): Promise<boolean> {
    return await removeFile(join(this.partialDir, name))
  }

  async list (): Promise<StorageListing> {
    const disks = (await listFiles(this.disksDir)).flatMap((file) => {
      const match = DISK_FILE.exec(file.name)
      return match === null ? [] : [{ ...file, diskId: match[1]! }]
    })
    const seeds = (await listFiles(this.seedsDir)).flatMap((file) => {
      const match = SEED_FILE.exec(file.name)
      return match === null ? [] : [{ ...file, instanceId: match[1]! }]
    })
    return { disks, seeds, partial: await listFiles(this.partialDir) }
  }

  /**
   * The base image in the storage directory, imported from the image directory if it is not
   * there yet: a reflink where the filesystem can, a copy where it cannot.
   */
  async #importBase (name: string): Promise<{ path: string, format: 'raw' | 'qcow2' }> {
    const image = await this.images.baseImage(name)
    const path = join(this.imagesDir, `${image.sha256}.${image.format}`)
    if (!await exists(path)) {
      await this.#make(path, async (partial) => { await copyFile(image.path, partial, constants.COPYFILE_FICLONE) })
    }
    return { path, format: image.format }
  }

  /**
   * Makes a file under partial/ and links it into place. A link never replaces a file, so if
   * another agent made the same file meanwhile, theirs stays (and may already be in use).
   */
  async #make (path: string, make: (partial: string) => Promise<void>): Promise<void> {
    const partial = join(this.partialDir, `${this.hostId}.${randomUUID()}`)
    try {
      await make(partial)
      await link(partial, path).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err
      })
    } finally {
      await rm(partial, { force: true })
    }
  }
}

async function exists (path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

async function removeFile (path: string): Promise<boolean> {
  const present = await exists(path)
  await rm(path, { force: true })
  return present
}

async function listFiles (dir: string): Promise<StoredFile[]> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch {
    return []
  }
  const files: StoredFile[] = []
  for (const name of names) {
    try {
      const info = await stat(join(dir, name))
      if (info.isFile()) files.push({ name, bytes: info.blocks * 512, modifiedAt: info.mtime.toISOString() })
    } catch {
      // Removed meanwhile.
    }
  }
  return files
}
