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
  waitSeconds: { min: 0, max: 300 },
  diskGiB: { min: 1, max: 16 * 1024 },
  /** Data disks per instance (with the boot disk and the cloud-init seed: vda to vdj). */
  dataDisks: 8,
  interfaces: 8,
  /**
   * Firewall rules on one network or one instance (AWS takes 60 a direction a security group,
   * omicron 1024 a VPC): an instance's hosts are told of at most those of its networks and its
   * own, which keeps what an agent is sent for it well inside an agent's body limit.
   */
  firewallRulesPerTarget: 32,
  sshKeys: 32,
  sshKeyMaxLength: 4096,
  /** cloud-init's user-data, in bytes of UTF-8 (Nova and KubeVirt allow more; a seed disk is small). */
  userDataBytes: 32 * 1024,
  /**
   * Networks' prefixes: at least four addresses (network, gateway, broadcast and one to give), at
   * most 65,536, which an allocation searches in one query (db/instances.ts).
   */
  networkPrefix: { min: 16, max: 30 }
} as const

export const DEFAULT_STOP_GRACE_SECONDS = 30

/** Instance names: lower-case DNS labels, so they can name things elsewhere too. */
export const INSTANCE_NAME_PATTERN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/

/**
 * Image names are relative paths inside a host's image directory: segments of letters, digits,
 * `.`, `_`, `+` and `-`, separated by single slashes, none starting with a dot (so no `.` or `..`
 * segment, no leading slash, no empty segment). The host agent also resolves symlinks before it
 * trusts one.
 */
export const IMAGE_NAME_PATTERN = /^[A-Za-z0-9_+-][A-Za-z0-9._+-]*(\/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$/
export const IMAGE_NAME_RULE = 'must be a relative path inside the image directory: segments of letters, digits, `.`, `_`, `+` and `-` separated by `/`, none starting with `.`'

export function isSafeImageName (name: string): boolean {
  return name.length <= LIMITS.imageNameMaxLength && IMAGE_NAME_PATTERN.test(name)
}

/**
 * A kernel command line is printable ASCII: the kernel parses bytes, and a control character or
 * anything beyond ASCII (which PostgreSQL or the VMM's API might also refuse) is a mistake.
 */
export const CMDLINE_PATTERN = /^[\x20-\x7e]*$/
export const CMDLINE_RULE = 'must be printable ASCII: letters, digits, spaces and punctuation, no control characters'

/**
 * Data disk and network names are lower-case DNS labels like instance names; `boot` names the
 * boot disk.
 */
export const BOOT_DISK_NAME = 'boot'

/**
 * An OpenSSH public key line: a key type, base64 key material and an optional comment, in
 * printable ASCII on one line.
 */
export const SSH_KEY_PATTERN = /^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+={0,3}( [\x20-\x7e]*)?$/
export const SSH_KEY_RULE = 'must be one OpenSSH public key line: a key type (ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256, …), the base64 key and an optional comment'

/**
 * Free text (user-data) travels as JSON, lands in PostgreSQL's jsonb and in a file: no NUL
 * character, and no unpaired UTF-16 surrogate, which is not Unicode.
 */
export const NO_NUL_PATTERN = /^[^\0]*$/
export const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * When a halt continues as new (workflows/execution.ts): once Temporal suggests it or its history
 * reaches this many events, well below Temporal's limits (51,200 events, 10,000 signals), and only
 * once the run has added this many while the halt waited, so a run that continues as new never
 * does so again at once. The worker's settings carry them; executions whose recorded settings
 * predate them use them as they are here.
 */
export const HISTORY_LIMITS = { continueAsNewAfterEvents: 8000, minGrowthEvents: 1000 } as const
