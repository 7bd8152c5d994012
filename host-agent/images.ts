/**
 * The host's image directory: kernels, initramfs images and base disk images, named relative to
 * it. A name must stay inside it: it is checked as text (`IMAGE_NAME_PATTERN`: no absolute path,
 * no `..`) and then resolved with realpath, so a symlink pointing out of the directory is refused
 * as well. The VMM is given the resolved path, not the name.
 *
 * Base disk images are the files named `*.raw` or `*.qcow2` whose format qemu-img reads as raw or
 * qcow2, and the `*.img` files it reads as qcow2 (Ubuntu's cloud images; a raw `.img` is as
 * likely an initramfs). The catalog gives each one's format, virtual size and SHA-256; the
 * checksum is computed once per file version (size and modification time) and kept.
 */
import { createHash } from 'node:crypto'
import { constants, createReadStream } from 'node:fs'
import { access, readdir, realpath, stat } from 'node:fs/promises'
import { join, relative, sep } from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { BaseImage } from '../domain/host-agent-api.js'
import { IMAGE_NAME_RULE, isSafeImageName } from '../domain/limits.js'
import { imageInfo, type ImageFormat } from './storage/qemu-img.js'

const BASE_IMAGE_NAME = /\.(raw|qcow2|img)$/

/** A request named an image that is not a readable file inside the image directory. */
export class ImageError extends Error {
  override name = 'ImageError'
}

export class ImageResolver {
  /** What each file was found to be, by its version: a base image, or null for none (an initramfs). */
  readonly #known = new Map<string, { version: string, image: BaseImage | null }>()

  constructor (readonly imageDir: string) {}

  async resolve (name: string): Promise<string> {
    if (!isSafeImageName(name)) {
      throw new ImageError(`image '${name}' ${IMAGE_NAME_RULE}`)
    }
    let root: string
    let resolved: string
    try {
      root = await realpath(this.imageDir)
      resolved = await realpath(join(root, name))
    } catch {
      throw new ImageError(`image '${name}' not found in the image directory`)
    }
    if (!resolved.startsWith(root + sep)) {
      throw new ImageError(`image '${name}' resolves outside the image directory`)
    }
    if (!(await stat(resolved)).isFile()) throw new ImageError(`image '${name}' is not a regular file`)
    try {
      await access(resolved, constants.R_OK)
    } catch {
      throw new ImageError(`image '${name}' is not readable`)
    }
    return resolved
  }

  /** The base image of that name, or an ImageError when it is none. */
  async baseImage (name: string): Promise<BaseImage & { path: string }> {
    const path = await this.resolve(name)
    const image = await this.#describe(name, path)
    if (image === null) throw new ImageError(`image '${name}' is not a raw or qcow2 disk image`)
    return { ...image, path }
  }

  /** Every base disk image in the directory, by name. */
  async catalog (): Promise<BaseImage[]> {
    let entries
    try {
      entries = await readdir(this.imageDir, { recursive: true, withFileTypes: true })
    } catch {
      return []
    }
    const images: BaseImage[] = []
    for (const entry of entries) {
      if (!entry.isFile() || !BASE_IMAGE_NAME.test(entry.name)) continue
      const name = relative(this.imageDir, join(entry.parentPath, entry.name))
      if (!isSafeImageName(name)) continue
      const image = await this.#describe(name, join(this.imageDir, name)).catch(() => null)
      if (image !== null) images.push(image)
    }
    return images.sort((a, b) => a.name.localeCompare(b.name))
  }

  async #describe (name: string, path: string): Promise<BaseImage | null> {
    const { size, mtimeMs } = await stat(path)
    const version = `${size}/${mtimeMs}`
    const known = this.#known.get(path)
    if (known?.version === version) return known.image
    const image = await this.#read(name, path)
    this.#known.set(path, { version, image })
    return image
  }

  /**
   * Reads a file's format and checksum: qemu-img and a pass over the whole file, once per
   * version of it, base image or not (the catalog is asked for at every heartbeat).
   */
  async #read (name: string, path: string): Promise<BaseImage | null> {
    const info = await imageInfo(path)
    if (info.format !== 'qcow2' && (info.format !== 'raw' || name.endsWith('.img'))) return null
    const hash = createHash('sha256')
    await pipeline(createReadStream(path), hash)
    return { name, format: info.format as ImageFormat, virtualSizeBytes: info.virtualSizeBytes, sha256: hash.digest('hex') }
  }
}
