import { z } from 'zod'
import { HOST_STATUSES, LOST_BY } from '../../domain/host.js'
import { LEASE_STATES } from '../../domain/host-lease.js'
import { HOST_ID_PATTERN } from '../../domain/ids.js'

const capacitySchema = z.object({ vcpus: z.number().int(), memoryMiB: z.number().int() })

export const hostSchema = z.object({
  id: z.string(),
  agentUrl: z.string(),
  status: z.enum(HOST_STATUSES),
  statusSince: z.string(),
  lastHeartbeatAt: z.string().nullable(),
  contactFailingSince: z.string().nullable().describe('since when calls to its agent fail; null while they work'),
  capacity: capacitySchema,
  reserved: capacitySchema,
  liveVmms: z.number().int(),
  lost: z.object({
    by: z.enum(LOST_BY),
    reason: z.string()
  }).nullable().describe('who declared the host lost, and why, while it is'),
  lease: z.object({
    state: z.enum(LEASE_STATES).describe('none: its agent keeps no lease; held; expiring: not surely held (or not granted yet), a partition healing now changes nothing; expired: its bound has passed, the host fenced unless its peers vouched for an outage of the control plane; fenced: declared lost by its lease'),
    grantedAt: z.string().nullable().describe('the last grant, answering its agent\'s renewal'),
    heldUntil: z.string().nullable().describe('until when its agent surely holds it'),
    fencedBy: z.string().nullable().describe('once not held: when the host is surely fenced (its watchdog fired, every VMM killed)')
  }).describe("the host's lease from the control plane (docs/design.md §17)"),
  cordonedAt: z.string().nullable().describe('set while the host takes no new VMM (a drain cordons it)'),
  drain: z.object({
    id: z.uuid(),
    status: z.enum(['draining', 'drained', 'stopped', 'failed']),
    instancesFound: z.number().int().describe('instances found running on the host since the drain began'),
    migrated: z.number().int(),
    failed: z.number().int().describe('instances whose migrations kept failing'),
    lastError: z.string().nullable(),
    startedAt: z.string(),
    finishedAt: z.string().nullable()
  }).nullable().describe("the host's latest drain")
}).meta({ id: 'Host' })

export const hostParamsSchema = z.strictObject({ id: z.string().regex(HOST_ID_PATTERN, 'must be a host ID like host-1') })

export const hostListSchema = z.object({ items: z.array(hostSchema) })
