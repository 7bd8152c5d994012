/**
 * The `VmConfig` body of `vm.create`, built from a VMM spec and the devices the agent prepared
 * for it. Field names and shapes are the real API's (cloud-hypervisor.yaml beside this file;
 * the conformance test validates every body against it). Choices that follow the real program
 * rather than its defaults:
 *
 * - memory `size` is in bytes;
 * - the console is `Off`: its default, `Tty`, would write to a daemon's stdout;
 * - the serial port is a Unix socket (mode `Socket`) the agent's console relay stays connected
 *   to, keeping a log and serving interactive consoles; its path is relative to the VMM's working
 *   directory, so the config a migration carries to another host is valid there (launch.ts);
 * - disks always carry `image_type`: auto-detection is deprecated and disables writes to
 *   sector 0 of a raw image it detected; a qcow2 overlay needs `backing_files: true` (off by
 *   default since v48), and its backing file is an absolute path, the same on every host;
 * - each NIC names the TAP the agent made, the MAC derived from the interface's ID, and
 *   `num_queues` matching the TAP's multi-queue flag.
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
  backing_files?: boolean
}

export interface NetConfig {
  tap: string
  mac: string
  num_queues: number
}

export interface VmConfig {
  payload: PayloadConfig
  cpus: { boot_vcpus: number, max_vcpus: number }
  memory: { size: number }
  serial: { mode: ConsoleMode, file?: string, socket?: string }
  console: { mode: ConsoleMode }
  disks?: DiskConfig[]
  net?: NetConfig[]
}

/** A disk image resolved to an absolute path: an instance disk, or the cloud-init seed. */
export interface ResolvedDisk {
  path: string
  readonly: boolean
  imageType: 'Qcow2' | 'Raw'
}

export interface ResolvedNet {
  tap: string
  mac: string
  numQueues: number
}

/** What the VM is built from, resolved to absolute paths and device names on this host. */
export interface ResolvedBootFiles {
  kernel: string
  initramfs: string | null
  disks: ResolvedDisk[]
  nets: ResolvedNet[]
}

const MIB = 1024 * 1024

/** `serialSocket` is relative to the VMM's working directory (launch.ts `SERIAL_SOCKET`). */
export function buildVmConfig (spec: VmmSpec, files: ResolvedBootFiles, serialSocket: string): VmConfig {
  const payload: PayloadConfig = { kernel: files.kernel }
  if (files.initramfs !== null) payload.initramfs = files.initramfs
  if (spec.boot.cmdline !== undefined) payload.cmdline = spec.boot.cmdline
  const config: VmConfig = {
    payload,
    cpus: { boot_vcpus: spec.vcpus, max_vcpus: spec.vcpus },
    memory: { size: spec.memoryMiB * MIB },
    serial: { mode: 'Socket', socket: serialSocket },
    console: { mode: 'Off' }
  }
  if (files.disks.length > 0) config.disks = files.disks.map(diskConfig)
  if (files.nets.length > 0) config.net = files.nets.map((nic) => ({ tap: nic.tap, mac: nic.mac, num_queues: nic.numQueues }))
  return config
}

function diskConfig (disk: ResolvedDisk): DiskConfig {
  const config: DiskConfig = { path: disk.path, readonly: disk.readonly, image_type: disk.imageType }
  if (disk.imageType === 'Qcow2') config.backing_files = true
  return config
}
