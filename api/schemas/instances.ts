import { z } from 'zod'
import { CONDITION_TYPES } from '../../domain/conditions.js'
import { EVENT_KINDS } from '../../domain/event.js'
import { bootSourceSchema } from '../../domain/host-agent-api.js'
import { INSTANCE_STATES, INTENDED_STATES, RESTART_POLICIES } from '../../domain/instance.js'
import { INSTANCE_NAME_PATTERN, LIMITS } from '../../domain/limits.js'
import { VMM_EXIT_CAUSES, VMM_STATES } from '../../domain/vmm.js'
import { urlInteger } from '../../http/url-integer.js'
import { cursorSchema } from './common.js'
import { operationSchema } from './operations.js'

const graceSeconds = z
  .number()
  .int('must be a whole number of seconds')
  .min(LIMITS.stopGraceSeconds.min)
  .max(LIMITS.stopGraceSeconds.max)

export const createInstanceBody = z.strictObject({
  name: z.string().max(LIMITS.nameMaxLength).regex(INSTANCE_NAME_PATTERN, 'must be lower-case letters, digits and dashes, starting and ending with a letter or digit'),
  vcpus: z.number().int().min(LIMITS.vcpus.min).max(LIMITS.vcpus.max),
  memoryMiB: z.number().int().min(LIMITS.memoryMiB.min).max(LIMITS.memoryMiB.max),
  boot: bootSourceSchema,
  start: z.boolean().default(true).describe('start the instance once created'),
  stopGraceSeconds: graceSeconds.optional().describe('how long a stop waits for the guest to power off before killing its VMM'),
  restartPolicy: z.enum(RESTART_POLICIES).default('never')
    .describe('on-failure: a failed instance restarts by itself, after 10 s doubling to 5 min (counted afresh after 10 min running)')
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

export const instanceSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  state: z.enum(INSTANCE_STATES),
  intendedState: z.enum(INTENDED_STATES),
  vcpus: z.number().int(),
  memoryMiB: z.number().int(),
  boot: bootSourceSchema,
  stopGraceSeconds: z.number().int(),
  restartPolicy: z.enum(RESTART_POLICIES),
  vmm: vmmSchema.nullable(),
  operation: operationSchema.nullable().describe('the operation in flight, if any'),
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
