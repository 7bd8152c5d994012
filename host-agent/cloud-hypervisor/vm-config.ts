/**
 * The `VmConfig` body of `vm.create`, built from a VMM spec. Field names and shapes are the
 * real API's (cloud-hypervisor.yaml beside this file; the conformance test validates every
 * body against it). Choices that follow the real program rather than its defaults:
 *
 * - memory `size` is in bytes;
 * - the console is `Off`: its default, `Tty`, would write to a daemon's stdout;
 * - the serial port goes to a file in the VMM's directory;
 * - disks always carry `image_type`: auto-detection is deprecated and disables writes to
 *   sector 0 of a raw image it detected.
 */
import type { VmmSpec } from '../../domain/host-agent-api.js'

export type ConsoleMode = 'Off' | 'Pty' | 'Tty' | 'File' | 'Socket' | 'Null'
export type ImageType = 'FixedVhd' | 'Qcow2' | 'Raw' | 'Vhdx'

export interface PayloadConfig {
  kernel: string
  initramfs?: string
  cmdline?: string
}

export interface DiskConfig {
  path: string
  readonly: boolean
  image_type: ImageType
}

export interface VmConfig {
  payload: PayloadConfig
  cpus: { boot_vcpus: number, max_vcpus: number }
  memory: { size: number }
  serial: { mode: ConsoleMode, file?: string }
  console: { mode: ConsoleMode }
  disks?: DiskConfig[]
}

/** A disk image resolved to an absolute path inside the host's image directory. */
export interface ResolvedDisk {
  path: string
  readonly: boolean
  imageType: ImageType
}

/** The spec's boot files and disks, resolved to absolute paths inside the image directory. */
export interface ResolvedBootFiles {
  kernel: string
  initramfs: string | null
  disks: ResolvedDisk[]
}

const MIB = 1024 * 1024

export function buildVmConfig (spec: VmmSpec, files: ResolvedBootFiles, serialFile: string): VmConfig {
  const payload: PayloadConfig = { kernel: files.kernel }
  if (files.initramfs !== null) payload.initramfs = files.initramfs
  if (spec.boot.cmdline !== undefined) payload.cmdline = spec.boot.cmdline
  const config: VmConfig = {
    payload,
    cpus: { boot_vcpus: spec.vcpus, max_vcpus: spec.vcpus },
    memory: { size: spec.memoryMiB * MIB },
    serial: { mode: 'File', file: serialFile },
    console: { mode: 'Off' }
  }
  if (files.disks.length > 0) {
    config.disks = files.disks.map((disk) => ({ path: disk.path, readonly: disk.readonly, image_type: disk.imageType }))
  }
  return config
}
