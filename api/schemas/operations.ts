import { z } from 'zod'
import { OPERATION_KINDS, OPERATION_STATUSES } from '../../domain/operation.js'

export const operationSchema = z.object({
  id: z.uuid(),
  kind: z.enum(OPERATION_KINDS),
  instanceId: z.uuid(),
  status: z.enum(OPERATION_STATUSES),
  error: z.object({ code: z.string(), message: z.string() }).nullable().optional(),
  startedAt: z.string(),
  finishedAt: z.string().nullable().optional(),
  workflowId: z.string(),
  runId: z.string().nullable()
}).meta({ id: 'Operation' })
