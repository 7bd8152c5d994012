/**
 * All of vmplane's activities, built around the worker's shared resources (Temporal samples'
 * `createActivities` pattern). Workflows import only the type.
 */
import type { Pool } from '../db/pool.js'
import type { HostAnnouncement } from '../domain/host.js'
import type { RestartBackoff } from '../domain/instance-rules.js'
import type { VmmReport } from '../domain/vmm.js'
import { HostAgentClient } from './host-agent-client.js'
import { createHostAgentCalls } from './host-agent-calls.js'
import { createHostFencing } from './host-fencing.js'
import { createReconciler } from './reconciler.js'
import { markHostUnreachable, recordHostHeartbeat } from './host-records.js'
import { insertInstance } from '../db/instances.js'
import type { NewInstance } from '../workflows/definitions.js'
import { appendEvent, loadInstance, recordInstanceChange, type ChangeEvent, type InstanceChange } from './instance-records.js'
import { applyVmmObservation, placeVmm, type PlacementRequest } from './vmm-records.js'

/** Durations the workflows need; from the worker's configuration, recorded in history. */
export interface OperationSettings extends RestartBackoff {
  bootTimeoutMs: number
  killBackstopMs: number
  hostUnreachableAfterMs: number
  /** How old an orphan VMM or a stray process must be before the reconciler reaps it. */
  orphanGraceMs: number
}

export interface ActivityDependencies {
  pool: Pool
  agentToken: string
  agentCallTimeoutMs: number
  settings: OperationSettings
}

export function createActivities (deps: ActivityDependencies) {
  const { pool } = deps
  const agentCalls = {
    pool,
    client: new HostAgentClient({ token: deps.agentToken, timeoutMs: deps.agentCallTimeoutMs }),
    unreachableAfterMs: deps.settings.hostUnreachableAfterMs
  }
  return {
    async operationSettings (): Promise<OperationSettings> {
      return deps.settings
    },
    /** Does nothing: awaited as an activity, it ends the workflow task (workflows/execution.ts). */
    async endWorkflowTask (): Promise<void> {},
    async loadInstance (instanceId: string) {
      return await loadInstance(pool, instanceId)
    },
    /** Creates the row if the API did not; `null` if its name was taken meanwhile. */
    async ensureInstance (instanceId: string, spec: NewInstance) {
      return await insertInstance(pool, instanceId, spec) ? await loadInstance(pool, instanceId) : null
    },
    async recordInstanceChange (change: InstanceChange) {
      return await recordInstanceChange(pool, change)
    },
    async appendEvent (event: ChangeEvent & { instanceId: string, eventId: string }) {
      await appendEvent(pool, event)
    },
    async placeVmm (request: PlacementRequest) {
      return await placeVmm(pool, request)
    },
    async applyVmmObservation (report: VmmReport) {
      return await applyVmmObservation(pool, report)
    },
    async recordHostHeartbeat (announcement: HostAnnouncement) {
      return await recordHostHeartbeat(pool, announcement)
    },
    async markHostUnreachable (hostId: string, lastHeardAt: string | null) {
      await markHostUnreachable(pool, hostId, lastHeardAt)
    },
    ...createHostAgentCalls(agentCalls),
    ...createHostFencing(agentCalls),
    ...createReconciler({ ...agentCalls, orphanGraceMs: deps.settings.orphanGraceMs })
  }
}

export type Activities = ReturnType<typeof createActivities>
