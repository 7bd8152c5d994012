/**
 * All of vmplane's activities, built around the worker's shared resources (Temporal samples'
 * `createActivities` pattern). Workflows import only the type.
 */
import type { Pool } from '../db/pool.js'
import type { HostAnnouncement } from '../domain/host.js'
import type { RestartBackoff } from '../domain/instance-rules.js'
import type { MigrationSettings } from '../domain/migration.js'
import type { VmmReport } from '../domain/vmm.js'
import { HostAgentClient } from './host-agent-client.js'
import { createHostAgentCalls } from './host-agent-calls.js'
import { createDrains } from './drains.js'
import { createHostFencing } from './host-fencing.js'
import { createReconciler } from './reconciler.js'
import { markHostUnreachable, recordHostHeartbeat } from './host-records.js'
import type { NewInstance } from '../domain/requests.js'
import { openInstance, readMigration, recordInstanceChange, type InstanceChange, type InstanceSnapshot } from './instance-records.js'
import { placeVmm, recordVmmObservations, type PlacementRequest } from './vmm-records.js'

/** Durations the workflows need; from the worker's configuration, recorded in history. */
export interface OperationSettings extends RestartBackoff {
  bootTimeoutMs: number
  placementTimeoutMs: number
  killBackstopMs: number
  hostUnreachableAfterMs: number
  /** How old an orphan VMM or a stray process must be before the reconciler reaps it. */
  orphanGraceMs: number
  /** Absent in histories recorded before live migration existed, whose executions never migrate. */
  migration: MigrationSettings
  /** When a halt continues as new (workflows/execution.ts); absent in histories recorded before it did. */
  history?: HistoryLimits
}

export interface HistoryLimits {
  continueAsNewAfterEvents: number
  minGrowthEvents: number
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
    /** What an instance's execution begins with: the settings, and the instance (created if asked). */
    async openExecution (instanceId: string, create?: NewInstance): Promise<{ settings: OperationSettings, snapshot: InstanceSnapshot | null }> {
      return { settings: deps.settings, snapshot: await openInstance(pool, instanceId, create) }
    },
    /** A live migration as recorded, for a migrate execution to resume from (workflows/migrate.ts). */
    async readMigration (migrationId: string) {
      return await readMigration(pool, migrationId)
    },
    async recordInstanceChange (change: InstanceChange) {
      return await recordInstanceChange(pool, change)
    },
    async placeVmm (request: PlacementRequest) {
      return await placeVmm(pool, request)
    },
    async recordVmmObservations (instanceId: string, reports: VmmReport[]) {
      return await recordVmmObservations(pool, instanceId, reports)
    },
    async recordHostHeartbeat (announcement: HostAnnouncement) {
      return await recordHostHeartbeat(pool, announcement)
    },
    async markHostUnreachable (hostId: string, lastHeardAt: string | null) {
      await markHostUnreachable(pool, hostId, lastHeardAt)
    },
    ...createDrains(pool),
    ...createHostAgentCalls(agentCalls),
    ...createHostFencing(agentCalls),
    ...createReconciler({ ...agentCalls, orphanGraceMs: deps.settings.orphanGraceMs })
  }
}

export type Activities = ReturnType<typeof createActivities>
