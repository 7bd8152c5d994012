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
  'failed',
  'destroyed'
] as const
export type InstanceState = (typeof INSTANCE_STATES)[number]

/** What the user last asked for; the reconciler drives the instance toward it. */
export const INTENDED_STATES = ['running', 'stopped', 'destroyed'] as const
export type IntendedState = (typeof INTENDED_STATES)[number]

export const RESTART_POLICIES = ['never', 'on-failure'] as const
export type RestartPolicy = (typeof RESTART_POLICIES)[number]

export interface BootSource {
  /** Kernel image, named relative to the host's image directory. */
  kernel: string
  initramfs?: string
  cmdline?: string
}

/** What a VMM of this instance is built from. */
export interface InstanceShape {
  vcpus: number
  memoryMiB: number
  boot: BootSource
}

export interface InstanceError {
  /** A stable, machine-readable reason, e.g. `VmmCrashed`, `BootTimeout`, `NoCapacity`. */
  code: string
  message: string
  at: string
}

export interface Instance extends InstanceShape {
  id: string
  name: string
  state: InstanceState
  intendedState: IntendedState
  stopGraceSeconds: number
  restartPolicy: RestartPolicy
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

/** States in which no operation is under way and nothing needs to happen by itself. */
export function isSettled (state: InstanceState): boolean {
  return state === 'running' || state === 'stopped' || state === 'failed' || state === 'destroyed'
}
