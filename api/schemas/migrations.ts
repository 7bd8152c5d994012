import { z } from 'zod'
import { HOST_ID_PATTERN } from '../../domain/ids.js'
import { MIGRATION_RECORD_PHASES, type Migration } from '../../domain/migration.js'
import { MIGRATION_HALF_PHASES, VMM_STATES } from '../../domain/vmm.js'

const sideSchema = z.object({
  vmmId: z.uuid(),
  hostId: z.string(),
  vmmState: z.enum(VMM_STATES),
  phase: z.enum(MIGRATION_HALF_PHASES).nullable().describe("this side's half, as its host's agent last reported it"),
  generation: z.number().int().describe("the generation of the agent's last report applied")
})

export const migrationSchema = z.object({
  id: z.uuid().describe('the ID of the migrate operation'),
  phase: z.enum(MIGRATION_RECORD_PHASES),
  source: sideSchema,
  target: sideSchema.nullable().describe('null until the target VMM is placed'),
  requestedHostId: z.string().nullable(),
  progress: z.object({
    memoryIterations: z.number().int().describe('precopy memory iterations the source has sent'),
    lastProgressAt: z.string().nullable()
  }),
  reason: z.string().nullable().describe('why it failed, was cancelled or aborted'),
  cancelRequestedAt: z.string().nullable(),
  startedAt: z.string(),
  committedAt: z.string().nullable().describe('when the target took the VM over and became the active VMM'),
  finishedAt: z.string().nullable()
}).meta({ id: 'Migration' })
export type MigrationView = z.infer<typeof migrationSchema>

export const migrationListSchema = z.object({ items: z.array(migrationSchema) })

export const migrateBody = z.strictObject({
  targetHostId: z.string().regex(HOST_ID_PATTERN, 'must be a host ID like host-1').optional().describe('the host to migrate to; absent: placement chooses one other than the source')
}).nullish()

export const migrationParamsSchema = z.strictObject({ id: z.uuid(), migrationId: z.uuid() })

export function migrationView (migration: Migration): MigrationView {
  const side = (s: Migration['source']) => ({ vmmId: s.vmmId, hostId: s.hostId, vmmState: s.state, phase: s.half?.phase ?? null, generation: s.generation })
  const progressAt = [migration.source.half?.progressAt, migration.target?.half?.progressAt].filter((at): at is string => at != null).sort().at(-1) ?? null
  return {
    id: migration.id,
    phase: migration.phase,
    source: side(migration.source),
    target: migration.target === null ? null : side(migration.target),
    requestedHostId: migration.requestedHostId,
    progress: { memoryIterations: migration.iterations, lastProgressAt: progressAt },
    reason: migration.reason,
    cancelRequestedAt: migration.cancelRequestedAt,
    startedAt: migration.startedAt,
    committedAt: migration.committedAt,
    finishedAt: migration.finishedAt
  }
}
