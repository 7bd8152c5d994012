/**
 * The host agent's HTTP API, as zod schemas shared by the agent (which validates every request
 * with them) and by the control plane's client (which validates every response).
 *
 *   GET    /healthz                   liveness, no token
 *   GET    /v1/vmms                   every VMM the agent has a record of
 *   GET    /v1/vmms/:id               one VMM, 404 `VmmNotFound` if the agent has no record of it
 *   PUT    /v1/vmms/:id               ensure the VMM exists: record, spawn, create, boot (idempotent)
 *   POST   /v1/vmms/:id/power-button  ACPI power button; with `killAfterMs`, re-pressed until then, then killed
 *   POST   /v1/vmms/:id/reboot        reboot the VM inside the same VMM process
 *   POST   /v1/vmms/:id/migration/send    send the VM to a migration's target (idempotent on the migration)
 *   POST   /v1/vmms/:id/migration/cancel  kill a migration's target unless it has finished receiving
 *   POST   /v1/vmms/:id/migration/resume  resume a migration's source held paused: the target does not have the VM
 *   DELETE /v1/vmms/:id               kill the VMM process, wait for it, clean up (idempotent)
 *   GET    /v1/lease                  whether this host holds its lease: a peer whose own lapsed asks (docs/design.md §17)
 *   GET    /v1/strays                 VMM processes under the agent's directory that no record owns
 *   DELETE /v1/strays/:pid?startTime= kill one of them (404 `StrayNotFound` if it is not, or no longer, a stray)
 */
import { z } from 'zod'
import {
  CMDLINE_PATTERN, CMDLINE_RULE, IMAGE_NAME_PATTERN, IMAGE_NAME_RULE, INSTANCE_NAME_PATTERN, LIMITS,
  NO_NUL_PATTERN, SSH_KEY_PATTERN, SSH_KEY_RULE, UNPAIRED_SURROGATE
} from './limits.js'
import { urlInteger } from './url-integer.js'
import { FIREWALL_PROTOCOLS } from './firewall.js'
import { NETWORK_OUTBOUND, VNI_RANGE } from './network-segments.js'
import { HOST_ID_PATTERN } from './ids.js'
import { isHostAddressOf, isNetworkAddress, networkOf, parseCidr } from './ipv4.js'
import type { HostImage } from './host.js'
import { MIGRATION_HALF_PHASES, VMM_EXIT_CAUSES, VMM_STATES } from './vmm.js'

export const imageNameSchema = z.string().max(LIMITS.imageNameMaxLength).regex(IMAGE_NAME_PATTERN, IMAGE_NAME_RULE)

export const bootSourceSchema = z.strictObject({
  kernel: imageNameSchema,
  initramfs: imageNameSchema.optional(),
  cmdline: z.string().max(LIMITS.cmdlineMaxLength).regex(CMDLINE_PATTERN, CMDLINE_RULE).optional()
})

/** Text that survives JSON, PostgreSQL and a file: no NUL, no unpaired surrogate. */
export const textSchema = (maxBytes: number) => z.string()
  .regex(NO_NUL_PATTERN, 'must not contain a NUL character')
  .refine((text) => !UNPAIRED_SURROGATE.test(text), 'must be valid Unicode (no unpaired surrogate)')
  .refine((text) => new TextEncoder().encode(text).length <= maxBytes, `must be at most ${maxBytes} bytes of UTF-8`)

export const sshKeySchema = z.string().max(LIMITS.sshKeyMaxLength).regex(SSH_KEY_PATTERN, SSH_KEY_RULE)

/**
 * A disk of the VMM, named by the disk's ID: the agent keeps it at a path made from the ID in
 * the storage directory, and makes it if it is missing (an overlay of `image`, or an empty raw
 * disk), so a retry, a restart or another host finds the same disk (I3).
 */
export const vmmDiskSchema = z.strictObject({
  id: z.uuid(),
  /** The base image a boot disk is an overlay of; a data disk has none and starts empty. */
  image: imageNameSchema.optional(),
  sizeGiB: z.number().int().min(LIMITS.diskGiB.min).max(LIMITS.diskGiB.max)
})
export type VmmDisk = z.infer<typeof vmmDiskSchema>

/** A network interface, named by its ID: the TAP and the MAC are derived from it (domain/interfaces.ts). */
export const vmmInterfaceSchema = z.strictObject({
  id: z.uuid(),
  /** The guest's address with its prefix, as cloud-init's network-config takes it: `10.0.0.5/24`. */
  address: z.cidrv4(),
  gateway: z.ipv4(),
  /** Its network's VNI: the segment its TAP is attached to (domain/network-segments.ts). */
  vni: z.number().int().min(VNI_RANGE.min).max(VNI_RANGE.max),
  /** Its network's way out to the hosts' LAN: NAT by this host, or none. */
  outbound: z.enum(NETWORK_OUTBOUND)
})
export type VmmInterface = z.infer<typeof vmmInterfaceSchema>

/** What the guest's cloud-init reads from the NoCloud seed. */
export const cloudInitSchema = z.strictObject({
  hostname: z.string().regex(INSTANCE_NAME_PATTERN).max(LIMITS.nameMaxLength),
  sshKeys: z.array(sshKeySchema).max(LIMITS.sshKeys),
  userData: textSchema(LIMITS.userDataBytes).optional()
})
export type CloudInit = z.infer<typeof cloudInitSchema>

export const vmmSpecSchema = z.strictObject({
  vcpus: z.number().int().min(LIMITS.vcpus.min).max(LIMITS.vcpus.max),
  memoryMiB: z.number().int().min(LIMITS.memoryMiB.min).max(LIMITS.memoryMiB.max),
  boot: bootSourceSchema,
  /** In the guest's order (vda, vdb, …); the seed, if any, comes after them. */
  disks: z.array(vmmDiskSchema).max(LIMITS.dataDisks + 1).optional(),
  interfaces: z.array(vmmInterfaceSchema).max(LIMITS.interfaces).optional(),
  /** Set for an instance booted from a disk image: the agent attaches a NoCloud seed. */
  cloudInit: cloudInitSchema.optional()
})
export type VmmSpec = z.infer<typeof vmmSpecSchema>

/**
 * A VMM's spec as a workflow has it: its interfaces do not say their segment or way out, which the activity
 * that calls the agent looks up (activities/host-agent-calls.ts), so executions recorded before
 * networks had segments ask for the same VMM as new ones.
 */
export type PlannedVmmSpec = Omit<VmmSpec, 'interfaces'> & { interfaces?: Array<Omit<VmmInterface, 'vni' | 'outbound'>> }

/**
 * Makes the VMM a live migration's target: it starts empty and receives the VM instead of
 * booting one. Its devices must already exist (the disks in the shared storage, the seed), except
 * its TAPs, which the agent makes with the names the source's VM config carries.
 */
export const incomingMigrationSchema = z.strictObject({ migrationId: z.uuid() })
export type IncomingMigration = z.infer<typeof incomingMigrationSchema>

/** An IPv4 range by its own address, no bit set past the prefix (as nftables takes it). */
export const ipv4RangeSchema = z.cidrv4().refine((cidr) => isNetworkAddress(parseCidr(cidr)), "must be the range's own address, with no bit set past the prefix")

/** What one rule allows, its peers (where from, or where to) resolved to ranges: a range, a network's, an instance's addresses. */
const allowanceSchema = z.strictObject({
  protocol: z.enum(FIREWALL_PROTOCOLS),
  ports: z.strictObject({ from: z.number().int().min(1).max(65535), to: z.number().int().min(1).max(65535) })
    .refine((ports) => ports.from <= ports.to, 'from must be at most to').optional(),
  peers: z.array(ipv4RangeSchema).max(LIMITS.interfaces)
}).refine((allowance) => allowance.ports === undefined || allowance.protocol === 'tcp' || allowance.protocol === 'udp', { message: 'ports are for tcp and udp', path: ['ports'] })

/** A network's gateway with its prefix, as a network gives it (its range routed through its segment). */
const gatewaySchema = z.cidrv4().refine((gateway) => {
  const cidr = parseCidr(networkOf(gateway))
  return cidr.prefix >= LIMITS.networkPrefix.min && cidr.prefix <= LIMITS.networkPrefix.max && isHostAddressOf(cidr, gateway.split('/')[0]!)
}, `must be an address of its network with the network's prefix, /${LIMITS.networkPrefix.min} to /${LIMITS.networkPrefix.max}, neither its first nor its last`)
/** The rules an instance's policy can hold: those of each of its networks and its own. */
const MAX_POLICY_RULES = (LIMITS.interfaces + 1) * LIMITS.firewallRulesPerTarget
export type Allowance = z.infer<typeof allowanceSchema>

/**
 * What a VMM's host is told of the firewall rules (db/firewall-rules.ts `policiesOf`): what the
 * rules allow into the instance beyond its own network's traffic, what they allow out of it when
 * any egress rule applies (null: it may send anywhere), and the networks its hosts route to (a
 * rule links them to one of its own). `generation` orders them: the agent keeps the newest it was
 * sent.
 */
export const vmmPolicySchema = z.strictObject({
  generation: z.number().int().min(0),
  ingress: z.array(allowanceSchema).max(MAX_POLICY_RULES),
  egress: z.array(allowanceSchema).max(MAX_POLICY_RULES).nullable(),
  routes: z.array(z.strictObject({ vni: z.number().int().min(VNI_RANGE.min).max(VNI_RANGE.max), gateway: gatewaySchema })).max(MAX_POLICY_RULES)
})
export type VmmPolicy = z.infer<typeof vmmPolicySchema>
/** The policy generation a VMM has, once its agent took (or kept) one. */
export const policyGenerationSchema = z.object({ generation: z.number().int() })

export const ensureVmmRequestSchema = z.strictObject({
  instanceId: z.uuid(),
  /** The instance's name, for logs and the VMM's record; not used to find anything. */
  instanceName: z.string().regex(INSTANCE_NAME_PATTERN).max(LIMITS.nameMaxLength),
  spec: vmmSpecSchema,
  incoming: incomingMigrationSchema.optional(),
  /** What the rules allow into the instance, and where its hosts route; none: nothing beyond its networks. */
  policy: vmmPolicySchema.optional()
})
export type EnsureVmmRequest = z.infer<typeof ensureVmmRequestSchema>

/** The longest stop the agent is told of: a day, far past any grace period (at most an hour). */
const MAX_KILL_AFTER_MS = 86_400_000

export const powerButtonRequestSchema = z.strictObject({
  /**
   * How long from now the stop's grace period lasts, in milliseconds: a duration, not a time,
   * because the host's clock is not the control plane's. The agent turns it into a deadline on
   * its own clock when the request arrives, presses the power button now and again every few
   * seconds, and kills the VMM at that deadline if it is still alive, even if it cannot reach
   * the control plane. An earlier deadline replaces a later one, never the reverse.
   */
  killAfterMs: z.number().int().min(0).max(MAX_KILL_AFTER_MS).optional()
})
export type PowerButtonRequest = z.infer<typeof powerButtonRequestSchema>

/** The `unix:<absolute path>` and `tcp:<host>:<port>` URLs Cloud Hypervisor migrates over. */
export const MIGRATION_URL_PATTERN = /^(unix:\/[^\0]{1,200}|tcp:[A-Za-z0-9.:[\]-]{1,100}:\d{1,5})$/

export const sendMigrationRequestSchema = z.strictObject({
  migrationId: z.uuid(),
  /** The target's `receiverUrl`. */
  destinationUrl: z.string().regex(MIGRATION_URL_PATTERN, 'must be unix:<absolute path> or tcp:<host>:<port>'),
  /** The pause Cloud Hypervisor aims for at the end of precopy (its `downtime_ms`). */
  downtimeMs: z.number().int().min(1).max(60_000),
  /** Cloud Hypervisor's own bound on the whole migration (`timeout_s`, cancel strategy). */
  timeoutS: z.number().int().min(1).max(86_400)
})
export type SendMigrationRequest = z.infer<typeof sendMigrationRequestSchema>

/** Names the migration a call about one half is for: the agent refuses a call about another. */
export const migrationOfCallSchema = z.strictObject({ migrationId: z.uuid() })
export type MigrationOfCall = z.infer<typeof migrationOfCallSchema>

export const vmmMigrationSchema = z.object({
  id: z.uuid(),
  role: z.enum(['source', 'target']),
  phase: z.enum(MIGRATION_HALF_PHASES),
  receiverUrl: z.string().nullable(),
  iterations: z.number().int().nonnegative(),
  progressAt: z.string(),
  reason: z.string().nullable()
})

export const vmmIdParamsSchema = z.strictObject({ id: z.uuid() })

export const vmmExitSchema = z.object({
  cause: z.enum(VMM_EXIT_CAUSES),
  code: z.number().int().nullable(),
  signal: z.string().nullable()
})

export const vmmViewSchema = z.object({
  id: z.uuid(),
  instanceId: z.uuid(),
  instanceName: z.string(),
  hostId: z.string(),
  state: z.enum(VMM_STATES),
  generation: z.number().int().nonnegative(),
  spec: vmmSpecSchema,
  pid: z.number().int().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  reason: z.string().nullable(),
  exit: vmmExitSchema.nullable(),
  /** When the agent kills the VMM unless it powers off first, by the host's clock. */
  stopDeadline: z.string().nullable(),
  /** Set while the VMM's API does not answer but its process lives: a condition, not death. */
  unresponsiveSince: z.string().nullable(),
  /** The VMM's half of a live migration (domain/vmm.ts `VmmMigration`), if it has one. */
  migration: vmmMigrationSchema.nullable(),
  /** The newest firewall policy its agent was sent, which its host enforces; null before any was. */
  policy: vmmPolicySchema.nullable()
})
export type VmmView = z.infer<typeof vmmViewSchema>

export const vmmListSchema = z.object({ items: z.array(vmmViewSchema) })

/** Another host an agent asks when its lease lapses. */
export const leasePeerSchema = z.strictObject({
  hostId: z.string().regex(HOST_ID_PATTERN),
  agentUrl: z.url()
})
export type LeasePeer = z.infer<typeof leasePeerSchema>

/** A host's answer to a peer: whether it holds its lease now, on its own clock. */
export const leaseStateSchema = z.strictObject({
  hostId: z.string(),
  holds: z.boolean()
})

export const agentHealthSchema = z.object({
  status: z.literal('ok'),
  hostId: z.string(),
  startedAt: z.string()
})

/**
 * A VMM process under the agent's state directory that no live record owns: nothing tracks it,
 * so the reconciler reaps it once it is older than the orphan grace period (I3).
 */
export const strayViewSchema = z.object({
  pid: z.number().int(),
  startTime: z.string(),
  apiSocket: z.string(),
  startedAt: z.string()
})
export type StrayView = z.infer<typeof strayViewSchema>
export const strayListSchema = z.object({ items: z.array(strayViewSchema) })

/** PIDs go up to Linux's `pid_max` limit, 2^22. */
export const strayParamsSchema = z.strictObject({ pid: urlInteger(1, 2 ** 22) })
/** The start time names the process: a PID reused since the listing is not the stray. */
export const strayQuerySchema = z.strictObject({ startTime: z.string().regex(/^\d+$/) })

/**
 * The body of every error the agent returns. A 404 is the agent's answer that it has no such
 * VMM or stray only when `error` says so (`AGENT_NOT_FOUND_ERRORS`); a route it does not have is
 * a 404 `Not Found`, which says nothing about any VMM (docs/design.md §5).
 */
export const agentErrorSchema = z.object({
  error: z.string().describe(
    'the status\'s name (Bad Request, Conflict, …), except in the agent\'s own 404s: VmmNotFound (it has no record of the VMM) and StrayNotFound (the process is not, or no longer, a stray)'
  ),
  message: z.string()
})

/** A base disk image in a host's image directory (`GET /v1/images`). */
export const baseImageSchema = z.object({
  name: z.string(),
  format: z.enum(['raw', 'qcow2']),
  virtualSizeBytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/)
})
export type BaseImage = z.infer<typeof baseImageSchema> & HostImage
export const baseImageListSchema = z.object({ items: z.array(baseImageSchema) })

/** A file in the storage directory (`GET /v1/storage`): what the reconciler compares with the records. */
const storedFileSchema = z.object({ name: z.string(), bytes: z.number().int().nonnegative(), modifiedAt: z.string() })
export const storageListingSchema = z.object({
  disks: z.array(storedFileSchema.extend({ diskId: z.uuid() })),
  seeds: z.array(storedFileSchema.extend({ instanceId: z.uuid() })),
  partial: z.array(storedFileSchema)
})
export type StorageListing = z.infer<typeof storageListingSchema>

export const diskParamsSchema = z.strictObject({ id: z.uuid() })
export const seedParamsSchema = z.strictObject({ instanceId: z.uuid() })
/** Partial files are named by the host making them and a UUID it chose: `host-1.<uuid>`. */
export const partialParamsSchema = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'must be a partial file the agent named: <host>.<uuid>')
})
export const removedSchema = z.object({ removed: z.boolean() })

/** A TAP device vmplane made on the host, and the live VMM whose it is (null: an orphan). */
export const tapViewSchema = z.object({
  name: z.string(),
  vmmId: z.uuid().nullable(),
  multiQueue: z.boolean(),
  bridge: z.string().nullable(),
  up: z.boolean()
})
export type TapView = z.infer<typeof tapViewSchema>
export const tapListSchema = z.object({ items: z.array(tapViewSchema) })
export const tapParamsSchema = z.strictObject({ name: z.string().regex(/^vmp[0-9a-f]{12}$/, 'must be a TAP name vmplane gives: vmp and 12 hex digits') })

/**
 * A network's segment on the host (host-agent/network/segments.ts): its bridge, whether its VXLAN
 * device is on it, and the TAPs attached. One with no TAP is a leftover, which the reconciler removes.
 */
export const segmentViewSchema = z.object({
  vni: z.number().int(),
  bridge: z.string(),
  joined: z.boolean(),
  taps: z.array(z.string()),
  /** Whether a live VMM's policy routes to its network, which keeps it with no TAP. */
  routed: z.boolean()
})
export type SegmentView = z.infer<typeof segmentViewSchema>
export const segmentListSchema = z.object({ items: z.array(segmentViewSchema) })
export const segmentParamsSchema = z.strictObject({ vni: urlInteger(VNI_RANGE.min, VNI_RANGE.max) })

export const consoleLogQuerySchema = z.strictObject({
  /** How much of the log's end to return. */
  bytes: urlInteger(1, 1024 * 1024).default(64 * 1024)
})
