import { z } from 'zod'
import { HOST_STATUSES } from '../../domain/host.js'

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
  liveVmms: z.number().int()
}).meta({ id: 'Host' })

export const hostListSchema = z.object({ items: z.array(hostSchema) })
