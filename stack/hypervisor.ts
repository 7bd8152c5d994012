/**
 * Which `cloud-hypervisor` the host agents run: the one named by VMPLANE_CLOUD_HYPERVISOR; else a
 * real one on PATH when this machine can run VMs (/dev/kvm opens read-write); else the
 * project's simulator, which speaks the same command line and REST API (docs/design.md §7).
 */
import { access, mkdir, open, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { runCommand } from '../host-agent/process/command.js'
import { REPO_ROOT, findOnPath } from '../scripts/tools/paths.js'

export const SIMULATOR_PATH = join(REPO_ROOT, 'dist', 'simulator', 'cloud-hypervisor')

export interface Hypervisor {
  binary: string
  simulated: boolean
}

export async function chooseHypervisor (configured: string | null): Promise<Hypervisor> {
  if (configured !== null) return { binary: configured, simulated: resolve(configured) === SIMULATOR_PATH }
  const real = await findOnPath('cloud-hypervisor')
  if (real !== null && await kvmUsable()) return { binary: real, simulated: false }
  if (!await access(SIMULATOR_PATH).then(() => true, () => false)) {
    throw new Error(`no cloud-hypervisor to run: the simulator ${SIMULATOR_PATH} is not built (npm run build)`)
  }
  return { binary: SIMULATOR_PATH, simulated: true }
}

async function kvmUsable (): Promise<boolean> {
  try {
    await (await open('/dev/kvm', 'r+')).close()
    return true
  } catch {
    return false
  }
}

/** The stand-in base disk image every simulated host has. */
export const STAND_IN_BASE_IMAGE = 'debian-12.qcow2'
const STAND_IN_BASE_IMAGE_BYTES = 2 * 1024 ** 3

/**
 * The stand-in images of a simulated host, so that the README's walk-through (which boots
 * `vmlinux` with `initrd.img`, and a disk made from `debian-12.qcow2`) works as written: an empty
 * qcow2 base image of 2 GiB, made by qemu-img (the same bytes on every host, so one checksum),
 * and text files as kernel and initramfs. The simulator takes its guest's behaviour from the
 * kernel command line, not from these files; a real host needs real images. Files already there
 * are left alone.
 */
export async function writeStandInImages (imageDir: string): Promise<void> {
  await mkdir(imageDir, { recursive: true })
  for (const name of ['vmlinux', 'initrd.img']) {
    await writeFile(join(imageDir, name), `vmplane stand-in ${name} for the Cloud Hypervisor simulator\n`, { flag: 'wx' })
      .catch((error: NodeJS.ErrnoException) => { if (error.code !== 'EEXIST') throw error })
  }
  const base = join(imageDir, STAND_IN_BASE_IMAGE)
  if (!await access(base).then(() => true, () => false)) {
    await runCommand('qemu-img', ['create', '-q', '-f', 'qcow2', base, String(STAND_IN_BASE_IMAGE_BYTES)])
  }
}
