import { z } from 'zod'
import { UUID_PATTERN } from '../../domain/ids.js'
import { INSTANCE_NAME_PATTERN, LIMITS } from '../../domain/limits.js'

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

export const idParamsSchema = z.strictObject({ id: z.uuid() })

/** A name (a DNS label) or an ID, as one pattern, which the API's document shows. */
const NAME_OR_ID_PATTERN = new RegExp(`^(${INSTANCE_NAME_PATTERN.source.slice(1, -1)}|${UUID_PATTERN.source.slice(1, -1)})$`)

/** A resource named by its name (a DNS label) or its ID. */
export function nameOrIdSchema (what: string) {
  return z.string().min(1).max(LIMITS.nameMaxLength)
    .regex(NAME_OR_ID_PATTERN, `must be ${what}'s name or ID`)
}

/** A page's cursor, as the API returns it (api/services/instances-repository.ts): base64url. */
export const cursorSchema = z.string().max(200).regex(/^[A-Za-z0-9_-]+$/, 'is not a cursor this API returned')

export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/
export const IDEMPOTENCY_KEY_RULE = 'must be 1 to 255 printable ASCII characters'

/** Mutating requests may carry an Idempotency-Key (plugins/idempotency.ts). */
export const idempotencyHeaders = z.object({
  'idempotency-key': z.string().regex(IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_KEY_RULE).optional()
    .describe('retries with the same key and request get the first answer, and create nothing twice; another request with the key is 422')
})
