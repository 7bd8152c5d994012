/**
 * All of vmplane's activities, built around the worker's shared resources (Temporal samples'
 * `createActivities` pattern), as the contract types them (contract/activities.ts): the workflows
 * import only the contract, never this.
 */
import type { Activities, OperationSettings } from '../contract/activities.js'
import type { Pool } from '../db/pool.js'
import { DEFAULT_LEASE_SETTINGS } from '../domain/host-lease.js'
import { HostAgentClient } from '../http/host-agent-client.js'
import { bootPlaced, createHostAgentCalls, PLACED_BOOT_TIMEOUT_MS } from './host-agent-calls.js'
import { createDrains } from './drains.js'
import { createFirewallPolicies } from './firewall-policies.js'
import { createHostFencing } from './host-fencing.js'
import { createHostLeases } from './host-leases.js'
import { createReconciler } from './reconciler.js'
import { markHostUnreachable, recordHostHeartbeat } from './host-records.js'
import { openInstance, readMigration, recordInstanceChange } from './instance-records.js'
import { recordVmmObservations } from './vmm-observations.js'
import { finishPlacedBoot, placeVmm } from './vmm-records.js'

export interface ActivityDependencies {
  pool: Pool
  agentToken: string
  agentCallTimeoutMs: number
  settings: OperationSettings
}

export function createActivities (deps: ActivityDependencies): Activities {
  const { pool } = deps
  const agentCalls = {
    pool,
    client: new HostAgentClient({ token: deps.agentToken, timeoutMs: deps.agentCallTimeoutMs }),
    unreachableAfterMs: deps.settings.hostUnreachableAfterMs
  }
  const placedBoots = { ...agentCalls, client: new HostAgentClient({ token: deps.agentToken, timeoutMs: Math.min(deps.agentCallTimeoutMs, PLACED_BOOT_TIMEOUT_MS) }) }
  return {
    async operationSettings () {
      return deps.settings
    },
    async openExecution (instanceId, create) {
      return { settings: deps.settings, snapshot: await openInstance(pool, instanceId, create) }
    },
    async readMigration (migrationId) {
      return await readMigration(pool, migrationId)
    },
    async recordInstanceChange (change) {
      return await recordInstanceChange(pool, change)
    },
    async placeVmm (request) {
      return await finishPlacedBoot(pool, request, await bootPlaced(placedBoots, request, await placeVmm(pool, request)))
    },
    async recordVmmObservations (instanceId, reports) {
      return await recordVmmObservations(pool, instanceId, reports)
    },
    async recordHostHeartbeat (announcement) {
      return await recordHostHeartbeat(pool, announcement)
    },
    async markHostUnreachable (hostId, lastHeardAt) {
      await markHostUnreachable(pool, hostId, lastHeardAt)
    },
    ...createDrains(pool),
    ...createHostAgentCalls(agentCalls),
    ...createHostFencing(agentCalls),
    ...createHostLeases({ pool: agentCalls.pool, lease: deps.settings.lease ?? DEFAULT_LEASE_SETTINGS }),
    ...createReconciler({ ...agentCalls, orphanGraceMs: deps.settings.orphanGraceMs }),
    ...createFirewallPolicies(agentCalls)
  }
}
