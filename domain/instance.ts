/**
 * Instances: what users create, start, stop, reboot and delete.
 *
 * The state a user sees is written only by the instance's own workflow (one writer per
 * instance, docs/design.md I4), from what its VMM reported and what the operation in flight is
 * doing. `stopped` and `failed` are shown only once a new start could proceed: there is no
 * live VMM left behind them.
 */

export const INSTANCE_STATES = [
  'creating',
  'starting',
  'running',
  'stopping',
  'stopped',
  'rebooting',
  /** Its VM moves to another host by live migration; it runs throughout. */
  'migrating',
  'failed',
  'destroyed'
] as const
export type InstanceState = (typeof INSTANCE_STATES)[number]

/** What the user last asked for; the reconciler drives the instance toward it. */
export const INTENDED_STATES = ['running', 'stopped', 'destroyed'] as const
export type IntendedState = (typeof INTENDED_STATES)[number]

export const RESTART_POLICIES = ['never', 'on-failure'] as const
export type RestartPolicy = (typeof RESTART_POLICIES)[number]

/**
 * What an instance does when its host is declared lost (by an operator, or by its lease:
 * docs/design.md §17): `restart` starts it again on another host at once; `fail` leaves it
 * `failed` (`HostLost`) until someone starts it.
 */
export const HOST_FAILURE_POLICIES = ['fail', 'restart'] as const
export type HostFailurePolicy = (typeof HOST_FAILURE_POLICIES)[number]

export interface BootSource {
  /** Kernel image, named relative to the host's image directory. */
  kernel: string
  initramfs?: string
  cmdline?: string
}

/** What a VMM of this instance is built from, besides its disks and interfaces. */
export interface InstanceShape {
  vcpus: number
  memoryMiB: number
  boot: BootSource
}

/**
 * A disk of the instance, in the guest's order (`slot`: vda is 0). The boot disk is an overlay
 * of a base image; a data disk starts empty. Its file, in the shared storage, is named by its ID.
 */
export interface DiskSpec {
  id: string
  name: string
  slot: number
  /** The base image of a boot disk, and the checksum it had when the instance was created. */
  image: string | null
  imageSha256: string | null
  sizeGiB: number
}

export interface InstanceDisk extends DiskSpec {
  /** When a VMM of the instance first ran with it: until then the disk may not be made yet. */
  madeAt: string | null
  destroyedAt: string | null
}

/** A network interface of the instance (`slot`: eth0 is 0); MAC and TAP derive from its ID. */
export interface InstanceInterface {
  id: string
  slot: number
  networkId: string
  networkName: string
  ip: string
  prefixLength: number
  gateway: string
  mac: string
  releasedAt: string | null
}

/** What cloud-init gets besides the instance's name and addresses. */
export interface CloudInitInput {
  sshKeys: string[]
  userData?: string
}

export interface InstanceError {
  /** A stable, machine-readable reason, e.g. `VmmCrashed`, `BootTimeout`, `NoCapacity`. */
  code: string
  message: string
  at: string
}

export interface Instance extends InstanceShape {
  id: string
  /** The project that owns it; absent in records read before projects existed. */
  projectId?: string
  name: string
  disks: InstanceDisk[]
  interfaces: InstanceInterface[]
  /** Set for an instance with a boot disk: its VMMs get a NoCloud seed. */
  cloudInit: CloudInitInput | null
  state: InstanceState
  intendedState: IntendedState
  stopGraceSeconds: number
  restartPolicy: RestartPolicy
  onHostFailure: HostFailurePolicy
  activeVmmId: string | null
  generation: number
  lastError: InstanceError | null
  /** Restarts in a row of an `on-failure` instance: the exponent of its backoff. */
  restartAttempts: number
  /** When the next automatic restart is due, while the instance waits in `failed`. */
  restartAt: string | null
  createdAt: string
  updatedAt: string
  destroyedAt: string | null
}

/**
 * What the host agent is asked to run for the instance (`PUT /v1/vmms/:id`): the instance's shape,
 * its disks and interfaces by ID, and cloud-init for an instance booting from a disk. Histories
 * recorded before disks existed carry instances without these fields.
 */
export function vmmSpecOf (instance: Instance) {
  const disks = (instance.disks ?? []).filter((disk) => disk.destroyedAt === null)
  const interfaces = (instance.interfaces ?? []).filter((nic) => nic.releasedAt === null)
  return {
    vcpus: instance.vcpus,
    memoryMiB: instance.memoryMiB,
    boot: instance.boot,
    ...(disks.length === 0
      ? {}
      : { disks: disks.map((disk) => ({ id: disk.id, ...(disk.image === null ? {} : { image: disk.image }), sizeGiB: disk.sizeGiB })) }),
    ...(interfaces.length === 0
      ? {}
      : { interfaces: interfaces.map((nic) => ({ id: nic.id, address: `${nic.ip}/${nic.prefixLength}`, gateway: nic.gateway })) }),
    ...(instance.cloudInit === null || instance.cloudInit === undefined
      ? {}
      : { cloudInit: { hostname: instance.name, ...instance.cloudInit } })
  }
}
