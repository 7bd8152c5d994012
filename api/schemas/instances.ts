import { z } from 'zod'
import { CONDITION_TYPES } from '../../domain/conditions.js'
import { EVENT_KINDS } from '../../domain/event.js'
import { bootSourceSchema, imageNameSchema, sshKeySchema, textSchema } from '../../domain/host-agent-api.js'
import { HOST_FAILURE_POLICIES, INSTANCE_STATES, INTENDED_STATES, RESTART_POLICIES } from '../../domain/instance.js'
import { BOOT_DISK_NAME, INSTANCE_NAME_PATTERN, LIMITS } from '../../domain/limits.js'
import { VMM_EXIT_CAUSES, VMM_STATES } from '../../domain/vmm.js'
import { urlInteger } from '../../domain/url-integer.js'
import { cursorSchema } from './common.js'
import { networkRefSchema } from './networks.js'
import { migrationSchema } from './migrations.js'
import { operationSchema } from './operations.js'

const graceSeconds = z
  .number()
  .int('must be a whole number of seconds')
  .min(LIMITS.stopGraceSeconds.min)
  .max(LIMITS.stopGraceSeconds.max)

const NAME_RULE = 'must be lower-case letters, digits and dashes, starting and ending with a letter or digit'
const dnsLabel = z.string().max(LIMITS.nameMaxLength).regex(INSTANCE_NAME_PATTERN, NAME_RULE)
const diskGiB = z.number().int('must be a whole number of GiB').min(LIMITS.diskGiB.min).max(LIMITS.diskGiB.max)

export const createInstanceBody = z.strictObject({
  name: z.string().max(LIMITS.nameMaxLength).regex(INSTANCE_NAME_PATTERN, 'must be lower-case letters, digits and dashes, starting and ending with a letter or digit'),
  vcpus: z.number().int().min(LIMITS.vcpus.min).max(LIMITS.vcpus.max),
  memoryMiB: z.number().int().min(LIMITS.memoryMiB.min).max(LIMITS.memoryMiB.max),
  boot: bootSourceSchema,
  start: z.boolean().default(true).describe('start the instance once created'),
  stopGraceSeconds: graceSeconds.optional().describe('how long a stop waits for the guest to power off before killing its VMM'),
  restartPolicy: z.enum(RESTART_POLICIES).default('never')
    .describe('on-failure: a failed instance restarts by itself, after 10 s doubling to 5 min (counted afresh after 10 min running)'),
  onHostFailure: z.enum(HOST_FAILURE_POLICIES).default('fail')
    .describe('when its host is declared lost (by an operator, or once its lease has surely lapsed): restart starts it on another host at once; fail leaves it failed (HostLost) until started'),
  bootDisk: z.strictObject({
    image: imageNameSchema.describe('a base image some host has (GET /v1/images)'),
    sizeGiB: diskGiB.optional().describe("at least the image's virtual size; by default, that size")
  }).optional().describe('a copy-on-write overlay of a base image, the first disk (vda); the instance then gets cloud-init'),
  dataDisks: z.array(z.strictObject({
    name: dnsLabel.refine((name) => name !== BOOT_DISK_NAME, `\`${BOOT_DISK_NAME}\` names the boot disk`),
    sizeGiB: diskGiB
  })).max(LIMITS.dataDisks).default([]).describe('empty disks, after the boot disk (vdb, vdc, …)'),
  interfaces: z.array(z.strictObject({
    network: networkRefSchema,
    ip: z.ipv4().optional().describe('an address inside the network; by default the lowest free one')
  })).max(LIMITS.interfaces).optional().describe('by default, one interface on the network named `default`, if there is one'),
  sshKeys: z.array(sshKeySchema).max(LIMITS.sshKeys).optional().describe('authorised for the default user by cloud-init; needs a bootDisk'),
  userData: textSchema(LIMITS.userDataBytes).optional().describe(`cloud-init user-data (#cloud-config …), at most ${LIMITS.userDataBytes} bytes; needs a bootDisk`)
}).superRefine((body, context) => {
  const seen = new Set<string>()
  for (const [index, disk] of body.dataDisks.entries()) {
    if (seen.has(disk.name)) context.addIssue({ code: 'custom', path: ['dataDisks', index, 'name'], message: `another data disk is named ${disk.name}` })
    seen.add(disk.name)
  }
  for (const field of ['sshKeys', 'userData'] as const) {
    if (body[field] !== undefined && body.bootDisk === undefined) {
      context.addIssue({ code: 'custom', path: [field], message: 'needs a bootDisk: cloud-init runs from the image the instance boots' })
    }
  }
}).meta({ id: 'CreateInstance' })

export const stopInstanceBody = z.strictObject({
  graceSeconds: graceSeconds.optional().describe("overrides the instance's stopGraceSeconds; 0 kills the VMM at once")
}).nullish()

/** `?wait=<seconds>` on a mutating request (api/services/operation-waiter.ts). */
export const waitQuery = z.strictObject({
  wait: urlInteger(LIMITS.waitSeconds.min, LIMITS.waitSeconds.max).optional()
    .describe('hold the answer up to this many seconds until the operation ends: 200 with its outcome, or 202 if it is still running')
})

export const deleteInstanceQuery = waitQuery.extend({
  graceSeconds: urlInteger(LIMITS.stopGraceSeconds.min, LIMITS.stopGraceSeconds.max).optional()
    .describe("overrides the instance's stopGraceSeconds; 0 kills the VMM at once")
})

export const listInstancesQuery = z.strictObject({
  limit: urlInteger(1, 500).default(50),
  cursor: cursorSchema.optional(),
  state: z.enum(INSTANCE_STATES).optional()
})

const vmmSchema = z.object({
  id: z.uuid(),
  hostId: z.string(),
  state: z.enum(VMM_STATES),
  reason: z.string().nullable(),
  exit: z.object({ cause: z.enum(VMM_EXIT_CAUSES), code: z.number().nullable(), signal: z.string().nullable() }).nullable()
})

export const DISK_STATES = ['pending', 'ready', 'destroyed'] as const

const diskViewSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  device: z.string().describe("the guest's device: vda, vdb, …"),
  image: z.string().nullable(),
  sizeGiB: z.number().int(),
  state: z.enum(DISK_STATES).describe('pending until a VMM first runs with it (it is made just before), ready after, destroyed once the instance is deleted and its VMMs are gone'),
  location: z.string().describe('its file, relative to the storage every host mounts')
})

const interfaceViewSchema = z.object({
  id: z.uuid(),
  name: z.string().describe("the guest's interface: eth0, eth1, …"),
  network: z.object({ id: z.uuid(), name: z.string() }),
  ip: z.string(),
  prefixLength: z.number().int(),
  gateway: z.string(),
  mac: z.string(),
  tap: z.string().describe('the TAP device on the host of its VMM'),
  released: z.boolean().describe('the address and MAC are free again (the instance is destroyed)')
})

export const instanceSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  state: z.enum(INSTANCE_STATES),
  intendedState: z.enum(INTENDED_STATES),
  vcpus: z.number().int(),
  memoryMiB: z.number().int(),
  boot: bootSourceSchema,
  disks: z.array(diskViewSchema),
  interfaces: z.array(interfaceViewSchema),
  cloudInit: z.object({ sshKeys: z.array(z.string()), userDataBytes: z.number().int() }).nullable()
    .describe('what the NoCloud seed carries besides the hostname and addresses; the user-data itself is not shown'),
  stopGraceSeconds: z.number().int(),
  restartPolicy: z.enum(RESTART_POLICIES),
  onHostFailure: z.enum(HOST_FAILURE_POLICIES),
  vmm: vmmSchema.nullable(),
  operation: operationSchema.nullable().describe('the operation in flight, if any'),
  migration: migrationSchema.nullable().describe('its live migration, while one runs'),
  lastError: z.object({ code: z.string(), message: z.string(), at: z.string() }).nullable(),
  conditions: z.array(z.object({ type: z.enum(CONDITION_TYPES), since: z.string(), message: z.string() }))
    .describe('what is known to be wrong or going on beside the state, e.g. HostUnreachable{since}'),
  createdAt: z.string(),
  updatedAt: z.string(),
  destroyedAt: z.string().nullable()
}).meta({ id: 'Instance' })

export const instanceListSchema = z.object({
  items: z.array(instanceSchema),
  nextCursor: z.string().nullable()
})

/** What every request that changes an instance answers. */
export const acceptedSchema = z.object({
  instance: instanceSchema,
  operation: operationSchema.nullable(),
  /** Set when nothing needed to happen, e.g. stopping a stopped instance. */
  message: z.string().optional()
})

export const listEventsQuery = z.strictObject({
  limit: urlInteger(1, 500).default(50),
  cursor: cursorSchema.optional()
})

export const eventSchema = z.object({
  id: z.uuid(),
  at: z.string(),
  kind: z.enum(EVENT_KINDS),
  state: z.enum(INSTANCE_STATES).nullable().describe("the instance's state after the event"),
  operationId: z.uuid().nullable(),
  vmmId: z.uuid().nullable(),
  message: z.string(),
  details: z.record(z.string(), z.unknown()).nullable()
}).meta({ id: 'InstanceEvent' })

export const eventListSchema = z.object({
  items: z.array(eventSchema),
  nextCursor: z.string().nullable()
})
