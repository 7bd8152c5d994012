/**
 * The host agent's HTTP API, as zod schemas shared by the agent (which validates every request
 * with them) and by the control plane's client (which validates every response).
 *
 *   GET    /healthz                   liveness, no token
 *   GET    /v1/vmms                   every VMM the agent has a record of
 *   GET    /v1/vmms/:id               one VMM, 404 if the agent has no record of it
 *   PUT    /v1/vmms/:id               ensure the VMM exists: record, spawn, create, boot (idempotent)
 *   POST   /v1/vmms/:id/power-button  ACPI power button; with a deadline, re-pressed until it, then killed
 *   POST   /v1/vmms/:id/reboot        reboot the VM inside the same VMM process
 *   DELETE /v1/vmms/:id               kill the VMM process, wait for it, clean up (idempotent)
 *   GET    /v1/strays                 VMM processes under the agent's directory that no record owns
 *   DELETE /v1/strays/:pid?startTime= kill one of them (404 if it is not, or no longer, a stray)
 */
import { z } from 'zod'
import { CMDLINE_PATTERN, CMDLINE_RULE, IMAGE_NAME_PATTERN, IMAGE_NAME_RULE, INSTANCE_NAME_PATTERN, LIMITS } from './limits.js'
import { urlInteger } from '../http/url-integer.js'
import { VMM_EXIT_CAUSES, VMM_STATES } from './vmm.js'

export const imageNameSchema = z.string().max(LIMITS.imageNameMaxLength).regex(IMAGE_NAME_PATTERN, IMAGE_NAME_RULE)

export const bootSourceSchema = z.strictObject({
  kernel: imageNameSchema,
  initramfs: imageNameSchema.optional(),
  cmdline: z.string().max(LIMITS.cmdlineMaxLength).regex(CMDLINE_PATTERN, CMDLINE_RULE).optional()
})

export const vmmSpecSchema = z.strictObject({
  vcpus: z.number().int().min(LIMITS.vcpus.min).max(LIMITS.vcpus.max),
  memoryMiB: z.number().int().min(LIMITS.memoryMiB.min).max(LIMITS.memoryMiB.max),
  boot: bootSourceSchema
})
export type VmmSpec = z.infer<typeof vmmSpecSchema>

export const ensureVmmRequestSchema = z.strictObject({
  instanceId: z.uuid(),
  /** The instance's name, for logs and the VMM's record; not used to find anything. */
  instanceName: z.string().regex(INSTANCE_NAME_PATTERN).max(LIMITS.nameMaxLength),
  spec: vmmSpecSchema
})
export type EnsureVmmRequest = z.infer<typeof ensureVmmRequestSchema>

export const powerButtonRequestSchema = z.strictObject({
  /**
   * The stop's absolute deadline. The agent presses the power button now and again every few
   * seconds, and kills the VMM at the deadline if it is still alive, even if it cannot reach
   * the control plane. An earlier deadline replaces a later one, never the reverse.
   */
  deadline: z.iso.datetime({ offset: true }).optional()
})
export type PowerButtonRequest = z.infer<typeof powerButtonRequestSchema>

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
  stopDeadline: z.string().nullable(),
  /** Set while the VMM's API does not answer but its process lives: a condition, not death. */
  unresponsiveSince: z.string().nullable()
})
export type VmmView = z.infer<typeof vmmViewSchema>

export const vmmListSchema = z.object({ items: z.array(vmmViewSchema) })

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

/** The body of every error the agent returns. */
export const agentErrorSchema = z.object({
  error: z.string(),
  message: z.string()
})
