import { z } from 'zod'

/** RFC 9457 problem details: every error the API returns has this shape. */
export const problemSchema = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  instance: z.string().optional(),
  /** For validation errors: each offending field and what is wrong with it. */
  errors: z.array(z.object({ path: z.string(), message: z.string() })).optional()
}).meta({ id: 'Problem' })

export const problemResponses = {
  400: problemSchema,
  401: problemSchema,
  403: problemSchema,
  404: problemSchema,
  409: problemSchema,
  422: problemSchema,
  429: problemSchema,
  503: problemSchema
}

export const idParamsSchema = z.strictObject({ id: z.uuid() })

/** Mutating requests may carry an Idempotency-Key (plugins/idempotency.ts). */
export const idempotencyHeaders = z.object({
  'idempotency-key': z.string().optional()
    .describe('retries with the same key and request get the first answer, and create nothing twice; another request with the key is 422')
})
