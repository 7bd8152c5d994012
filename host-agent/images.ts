/**
 * Boot images are named relative to the host's image directory and must stay inside it. A name
 * is checked as text (`IMAGE_NAME_PATTERN`: no absolute path, no `..`) and then resolved with
 * realpath, so a symlink pointing out of the directory is refused as well. The VMM is given the
 * resolved path, not the name.
 */
import { constants } from 'node:fs'
import { access, realpath, stat } from 'node:fs/promises'
import { join, sep } from 'node:path'
import type { VmmSpec } from '../domain/host-agent-api.js'
import { IMAGE_NAME_RULE, isSafeImageName } from '../domain/limits.js'
import type { ResolvedBootFiles } from './cloud-hypervisor/vm-config.js'

/** A request named an image that is not a readable file inside the image directory. */
export class ImageError extends Error {
  override name = 'ImageError'
}

export class ImageResolver {
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

  async resolveBootFiles (spec: VmmSpec): Promise<ResolvedBootFiles> {
    const kernel = await this.resolve(spec.boot.kernel)
    const initramfs = spec.boot.initramfs === undefined ? null : await this.resolve(spec.boot.initramfs)
    return { kernel, initramfs, disks: [] }
  }
}
