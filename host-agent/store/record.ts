/**
 * A VMM's record: everything the agent knows about one VMM, kept in
 * `<stateDir>/vmms/<vmmId>/record.json` and written before anything happens to the process
 * (I3): before the spawn, before a kill, and after every observed change.
 *
 * `generation` counts the changes the control plane should hear about; `reportedGeneration` is
 * the last one Temporal accepted. The gap between them is the report outbox (reports/outbox.ts).
 */
import { z } from 'zod'
import { incomingMigrationSchema, sendMigrationRequestSchema, vmmMigrationSchema, vmmPolicySchema, vmmSpecSchema, type VmmView } from '../../domain/host-agent-api.js'
import { VMM_EXIT_CAUSES, VMM_STATES, type VmmReport } from '../../domain/vmm.js'

const exitSchema = z.object({
  cause: z.enum(VMM_EXIT_CAUSES),
  code: z.number().int().nullable(),
  signal: z.string().nullable()
})

/**
 * A kill the agent decided on and recorded before sending SIGKILL, so the exit is classified
 * right even if the agent dies between the kill and the exit.
 */
const pendingKillSchema = z.object({
  cause: z.enum(['stop-deadline', 'boot-failed', 'migration-failed', 'migration-cancelled', 'fenced']),
  reason: z.string()
})

/**
 * A source's send as it was asked for, and how far the agent got with it: enough to issue it
 * again after an agent restart that came between the record and the call, and never twice.
 */
const outgoingMigrationSchema = sendMigrationRequestSchema.extend({
  /**
   * Where this migration's events begin in the VMM's event file: what comes before is an earlier
   * migration's, and a restarted agent reads from here.
   */
  eventsFrom: z.number().int().nonnegative(),
  /** Cloud Hypervisor took the send: it answered 204, or its events show the migration started. */
  accepted: z.boolean(),
  /**
   * Cloud Hypervisor paused the VM for the migration's downtime (`vm paused` after the send
   * began): from then on a failure may leave the VM running on the target as well.
   */
  downtimeBegan: z.boolean().default(false)
})
export type OutgoingMigration = z.infer<typeof outgoingMigrationSchema>

export const agentVmmRecordSchema = z.object({
  id: z.uuid(),
  instanceId: z.uuid(),
  instanceName: z.string(),
  spec: vmmSpecSchema,
  state: z.enum(VMM_STATES),
  generation: z.number().int().nonnegative(),
  reportedGeneration: z.number().int().nonnegative(),
  pid: z.number().int().positive().nullable(),
  /** Field 22 of /proc/<pid>/stat: with the PID, the identity of the process. */
  pidStartTime: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  reason: z.string().nullable(),
  exit: exitSchema.nullable(),
  stopDeadline: z.string().nullable(),
  unresponsiveSince: z.string().nullable(),
  destroyRequested: z.boolean(),
  pendingKill: pendingKillSchema.nullable(),
  /** The VMM's half of a live migration; records written before migration existed have none. */
  migration: vmmMigrationSchema.nullable().default(null),
  /** Set for a VMM ensured as a migration's target: it receives its VM instead of booting one. */
  incoming: incomingMigrationSchema.nullable().default(null),
  /** Set once the VMM was asked to send its VM (the latest send, while `migration` is its half). */
  outgoing: outgoingMigrationSchema.nullable().default(null),
  /** The newest firewall policy the control plane sent for it (records written before rules have none). */
  policy: vmmPolicySchema.nullable().default(null)
})
export type AgentVmmRecord = z.infer<typeof agentVmmRecordSchema>
export type PendingKill = z.infer<typeof pendingKillSchema>

export function toView (record: AgentVmmRecord, hostId: string): VmmView {
  return {
    id: record.id,
    instanceId: record.instanceId,
    instanceName: record.instanceName,
    hostId,
    state: record.state,
    generation: record.generation,
    spec: record.spec,
    pid: record.pid,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    reason: record.reason,
    exit: record.exit,
    stopDeadline: record.stopDeadline,
    unresponsiveSince: record.unresponsiveSince,
    migration: record.migration,
    policy: record.policy
  }
}

export function toReport (record: AgentVmmRecord, hostId: string): VmmReport {
  return {
    vmmId: record.id,
    instanceId: record.instanceId,
    hostId,
    state: record.state,
    generation: record.generation,
    observedAt: record.updatedAt,
    reason: record.reason,
    exit: record.exit,
    unresponsiveSince: record.unresponsiveSince,
    migration: record.migration
  }
}
