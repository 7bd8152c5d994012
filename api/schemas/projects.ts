/** Projects, their tokens, quotas and audit trail, as the API shows them (docs/design.md §18). */
import { z } from 'zod'
import { FLEET_ROLES, PROJECT_ROLES } from '../../domain/access-policy.js'
import { UUID_PATTERN } from '../../domain/ids.js'
import { INSTANCE_NAME_PATTERN, LIMITS } from '../../domain/limits.js'
import { QUOTA_RESOURCES } from '../../domain/projects.js'
import { urlInteger } from '../../domain/url-integer.js'
import { cursorSchema, nameOrIdSchema } from './common.js'

/** A project named by its name or its ID. */
export const projectRefSchema = nameOrIdSchema('a project')

/** Whether a route plugin is registered under `/v1/projects/{project}`, or unscoped (the `default` project's, deprecated). */
export interface RouteScope {
  scoped: boolean
}

/**
 * A route's params: in a project's scope, `project` beside its own. Typed as its own: handlers
 * read the project from `request.project`, which the policy's hook resolved, never from here.
 */
export function paramsIn<T extends z.ZodObject> (scope: RouteScope, params: T): T {
  return scope.scoped ? params.extend({ project: projectRefSchema }) as unknown as T : params
}

/** The schema of a route with no params of its own: `project`'s, in a project's scope. */
export function scopeParams (scope: RouteScope) {
  return scope.scoped ? { params: z.strictObject({ project: projectRefSchema }) } : {}
}

export const createProjectBody = z.strictObject({
  name: z.string().max(LIMITS.nameMaxLength)
    .regex(INSTANCE_NAME_PATTERN, 'must be lower-case letters, digits and dashes, starting and ending with a letter or digit')
    .refine((name) => !UUID_PATTERN.test(name), 'must not look like an ID')
}).meta({ id: 'CreateProject' })

export const projectSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  createdAt: z.string()
}).meta({ id: 'Project' })

export const projectListSchema = z.object({ items: z.array(projectSchema) })

export const projectParamsSchema = z.strictObject({ project: projectRefSchema })

const quotaValues = (describe: string) => z.object(Object.fromEntries(QUOTA_RESOURCES.map((resource) => [resource, z.number().int().nullable()]))).describe(describe)

export const quotasSchema = z.object({
  limits: quotaValues('each resource\'s limit; null: none'),
  use: quotaValues('what the project\'s live instances hold: charged when an instance is created, given back once it is destroyed (its VMMs and disks gone)')
}).meta({ id: 'Quotas' })

export const setQuotasBody = z.strictObject(Object.fromEntries(QUOTA_RESOURCES.map((resource) => [
  resource,
  z.number().int().min(0).max(2 ** 31 - 1).nullable().optional().describe(`the limit on ${resource}; null: none; left out: unchanged`)
]))).meta({ id: 'SetQuotas' })

const tokenNameSchema = z.string().min(1).max(LIMITS.nameMaxLength).regex(/^[\x20-\x7e]+$/, 'must be printable ASCII')

/** How long a token lives when its request says nothing: 90 days; at most a year. */
const DEFAULT_TOKEN_DAYS = 90
const MAX_TOKEN_DAYS = 366

const tokenLifetime = {
  name: tokenNameSchema.describe('who or what the token is for, as the audit trail names it'),
  expiresInDays: z.number().int().min(1).max(MAX_TOKEN_DAYS).default(DEFAULT_TOKEN_DAYS)
}

export const createProjectTokenBody = z.strictObject({
  ...tokenLifetime,
  role: z.enum(PROJECT_ROLES).describe('viewer: reads; collaborator: also changes instances and networks; admin: also manages tokens and reads the audit trail')
}).meta({ id: 'CreateProjectToken' })

export const createFleetTokenBody = z.strictObject({
  ...tokenLifetime,
  role: z.enum(FLEET_ROLES).describe('fleet-viewer: reads everything; fleet-operator: does everything')
}).meta({ id: 'CreateFleetToken' })

export const tokenSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  role: z.string(),
  project: z.string().nullable().describe("the project's ID; null for a fleet token"),
  createdBy: z.string().describe("the ID of the token that made it (`operator`: VMPLANE_API_TOKEN's)"),
  createdAt: z.string(),
  expiresAt: z.string(),
  revokedAt: z.string().nullable()
}).meta({ id: 'Token' })

export const newTokenSchema = tokenSchema.extend({
  token: z.string().describe('the token itself, shown this once: only its hash is kept')
}).meta({ id: 'NewToken' })

export const tokenListSchema = z.object({ items: z.array(tokenSchema) })

export const tokenParamsSchema = z.strictObject({ tokenId: z.uuid() })

export const auditEventSchema = z.object({
  id: z.number().int(),
  at: z.string(),
  tokenId: z.string(),
  tokenName: z.string(),
  project: z.string().nullable().describe("the project's ID; null for the fleet's routes"),
  method: z.string(),
  route: z.string(),
  path: z.string(),
  status: z.number().int().describe('the answer: 2xx done or accepted, 4xx refused, 5xx failed'),
  requestId: z.string(),
  remoteAddress: z.string(),
  idempotencyKey: z.string().nullable()
}).meta({ id: 'AuditEvent' })

export const auditListSchema = z.object({
  items: z.array(auditEventSchema),
  nextCursor: cursorSchema.nullable()
})

export const auditQuery = z.strictObject({
  limit: urlInteger(1, 500).default(100),
  cursor: cursorSchema.optional()
})
