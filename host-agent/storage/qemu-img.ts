/**
 * Disk images through Debian's qemu-utils (`qemu-img`): what an image is (format, virtual size,
 * backing file) and making the two kinds of instance disk, a qcow2 overlay on a base image and
 * an empty sparse raw disk.
 */
import { runCommand } from '../process/command.js'

export type ImageFormat = 'raw' | 'qcow2'

export interface ImageInfo {
  format: string
  virtualSizeBytes: number
  /** The bytes the image takes on disk (sparse and copy-on-write images take less). */
  actualSizeBytes: number
  backingFile: string | null
}

export async function imageInfo (path: string): Promise<ImageInfo> {
  // -U: read without taking the image's lock, so a disk in use by a VMM can be inspected.
  const info = JSON.parse(await runCommand('qemu-img', ['info', '-U', '--output=json', path])) as {
    format: string
    'virtual-size': number
    'actual-size'?: number
    'backing-filename'?: string
  }
  return {
    format: info.format,
    virtualSizeBytes: info['virtual-size'],
    actualSizeBytes: info['actual-size'] ?? 0,
    backingFile: info['backing-filename'] ?? null
  }
}

/** A qcow2 overlay of `base` (an absolute path, the same on every host), `sizeBytes` large. */
export async function createOverlay (path: string, base: string, baseFormat: ImageFormat, sizeBytes: number): Promise<void> {
  await runCommand('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', base, '-F', baseFormat, path, String(sizeBytes)])
}

/** An empty raw disk, sparse: it takes no space until the guest writes. */
export async function createRaw (path: string, sizeBytes: number): Promise<void> {
  await runCommand('qemu-img', ['create', '-q', '-f', 'raw', path, String(sizeBytes)])
}
