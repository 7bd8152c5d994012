/**
 * Bounds on what users may ask for. The API validates against them; the host agent checks
 * again, since it trusts nobody's input.
 */

export const LIMITS = {
  vcpus: { min: 1, max: 64 },
  memoryMiB: { min: 64, max: 1024 * 1024 },
  /** Grace period of a stop, in seconds; 0 means kill now. */
  stopGraceSeconds: { min: 0, max: 3600 },
  nameMaxLength: 63,
  cmdlineMaxLength: 4096,
  imageNameMaxLength: 255,
  /** How long `?wait=` may hold a mutating request's answer, in seconds. */
  waitSeconds: { min: 0, max: 300 }
} as const

export const DEFAULT_STOP_GRACE_SECONDS = 30

/** Instance names: lower-case DNS labels, so they can name things elsewhere too. */
export const INSTANCE_NAME_PATTERN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/

/**
 * Image names are relative paths inside a host's image directory: no leading slash, no `..`
 * segment, no empty segment. The host agent also resolves symlinks before it trusts one.
 */
export function isSafeImageName (name: string): boolean {
  if (name.length === 0 || name.length > LIMITS.imageNameMaxLength) return false
  if (name.startsWith('/') || name.includes('\0')) return false
  return name.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..')
}
