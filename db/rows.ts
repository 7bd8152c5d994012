/**
 * Maps rows to domain objects. The column lists here are the one place that knows how a
 * table's columns spell the domain's fields.
 */
import type { InstanceEvent } from '../domain/event.js'
import type { Host } from '../domain/host.js'
import type { Instance } from '../domain/instance.js'
import type { Migration, MigrationSide } from '../domain/migration.js'
import type { Operation } from '../domain/operation.js'
import type { VmmRecord } from '../domain/vmm.js'

type Row = Record<string, any>

export const INSTANCE_COLUMNS = `i.id, i.project_id, i.name, i.vcpus, i.memory_mib, i.boot, i.stop_grace_seconds, i.restart_policy, i.on_host_failure,
  i.state, i.intended_state, i.active_vmm_id, i.generation, i.last_error, i.restart_attempts, i.restart_at,
  i.created_at, i.updated_at, i.destroyed_at, i.cloud_init,
  (SELECT COALESCE(jsonb_agg(jsonb_build_object(
      'id', d.id, 'name', d.name, 'slot', d.slot, 'image', d.image, 'imageSha256', d.image_sha256,
      'sizeGiB', d.size_gib, 'madeAt', d.made_at, 'destroyedAt', d.destroyed_at) ORDER BY d.slot), '[]'::jsonb)
     FROM disks d WHERE d.instance_id = i.id) AS disks,
  (SELECT COALESCE(jsonb_agg(jsonb_build_object(
      'id', n.id, 'slot', n.slot, 'networkId', n.network_id, 'networkName', w.name, 'ip', host(n.ip),
      'prefixLength', masklen(w.cidr), 'gateway', host(w.gateway), 'mac', n.mac::text, 'releasedAt', n.released_at) ORDER BY n.slot), '[]'::jsonb)
     FROM interfaces n JOIN networks w ON w.id = n.network_id WHERE n.instance_id = i.id) AS interfaces`

export function toInstance (row: Row): Instance {
  return {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    vcpus: row.vcpus,
    memoryMiB: row.memory_mib,
    boot: row.boot,
    disks: row.disks,
    interfaces: row.interfaces,
    cloudInit: row.cloud_init,
    stopGraceSeconds: row.stop_grace_seconds,
    restartPolicy: row.restart_policy,
    onHostFailure: row.on_host_failure,
    state: row.state,
    intendedState: row.intended_state,
    activeVmmId: row.active_vmm_id,
    generation: row.generation,
    lastError: row.last_error,
    restartAttempts: row.restart_attempts,
    restartAt: row.restart_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    destroyedAt: row.destroyed_at
  }
}

export const VMM_COLUMNS = `v.id, v.instance_id, v.host_id, v.state, v.generation, v.reason, v.exit,
  v.unresponsive_since, v.running_since, v.migration, v.created_at, v.updated_at, v.destroyed_at`

export function toVmm (row: Row): VmmRecord {
  return {
    id: row.id,
    instanceId: row.instance_id,
    hostId: row.host_id,
    state: row.state,
    generation: row.generation,
    reason: row.reason,
    exit: row.exit,
    unresponsiveSince: row.unresponsive_since,
    runningSince: row.running_since,
    migration: row.migration,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    destroyedAt: row.destroyed_at
  }
}

/** A VMM's row as `to_jsonb` gives it, its times in the form the pool's parser gives them. */
export function vmmOfJson (json: Row): VmmRecord {
  return toVmm({
    ...json,
    unresponsive_since: isoOrNull(json.unresponsive_since),
    running_since: isoOrNull(json.running_since),
    created_at: isoOrNull(json.created_at),
    updated_at: isoOrNull(json.updated_at),
    destroyed_at: isoOrNull(json.destroyed_at)
  })
}

export const OPERATION_COLUMNS = 'o.id, o.kind, o.instance_id, o.status, o.error, o.started_at, o.finished_at, o.workflow_id, o.run_id'

export function toOperation (row: Row): Operation {
  return {
    id: row.id,
    kind: row.kind,
    instanceId: row.instance_id,
    status: row.status,
    error: row.error,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    workflowId: row.workflow_id,
    runId: row.run_id
  }
}

export const EVENT_COLUMNS = 'e.id, e.instance_id, e.at, e.kind, e.state, e.operation_id, e.vmm_id, e.message, e.details'

export function toEvent (row: Row): InstanceEvent {
  return {
    id: row.id,
    instanceId: row.instance_id,
    at: row.at,
    kind: row.kind,
    state: row.state,
    operationId: row.operation_id,
    vmmId: row.vmm_id,
    message: row.message,
    details: row.details
  }
}

export const HOST_COLUMNS = `h.id, h.agent_url, h.vcpus, h.memory_mib, h.status, h.status_since, h.last_heartbeat_at, h.contact_failing_since,
  COALESCE((SELECT sum(r.vcpus) FROM reservations r WHERE r.host_id = h.id), 0)::int AS reserved_vcpus,
  COALESCE((SELECT sum(r.memory_mib) FROM reservations r WHERE r.host_id = h.id), 0)::int AS reserved_memory_mib`

export function toHost (row: Row): Host {
  return {
    id: row.id,
    agentUrl: row.agent_url,
    vcpus: row.vcpus,
    memoryMiB: row.memory_mib,
    status: row.status,
    statusSince: row.status_since,
    lastHeartbeatAt: row.last_heartbeat_at,
    contactFailingSince: row.contact_failing_since,
    reserved: { vcpus: row.reserved_vcpus, memoryMiB: row.reserved_memory_mib }
  }
}

/**
 * A migration as one JSON value (`m` the migration, `s` and `t` its source and target VMMs), so
 * an instance's query can carry its live migration in a lateral join.
 */
export const MIGRATION_JSON = `jsonb_build_object(
    'id', m.id, 'instanceId', m.instance_id, 'phase', m.phase, 'reason', m.reason, 'requestedHostId', m.requested_host_id,
    'cancelRequestedAt', m.cancel_requested_at, 'startedAt', m.started_at, 'committedAt', m.committed_at, 'finishedAt', m.finished_at,
    'source', jsonb_build_object('vmmId', s.id, 'hostId', s.host_id, 'state', s.state, 'generation', s.generation, 'half', s.migration),
    'target', CASE WHEN t.id IS NULL THEN NULL
                   ELSE jsonb_build_object('vmmId', t.id, 'hostId', t.host_id, 'state', t.state, 'generation', t.generation, 'half', t.migration) END)`
export const MIGRATION_JOINS = 'JOIN vmms s ON s.id = m.source_vmm_id LEFT JOIN vmms t ON t.id = m.target_vmm_id'

export function toMigration (json: Row): Migration {
  const side = (s: Row | null): MigrationSide | null => s === null
    ? null
    // A VMM's half of an earlier migration is not this one's.
    : { vmmId: s.vmmId, hostId: s.hostId, state: s.state, generation: s.generation, half: s.half?.id === json.id ? s.half : null }
  const source = side(json.source)!
  return {
    id: json.id,
    instanceId: json.instanceId,
    phase: json.phase,
    source,
    target: side(json.target),
    requestedHostId: json.requestedHostId,
    iterations: source.half?.iterations ?? 0,
    reason: json.reason,
    cancelRequestedAt: isoOrNull(json.cancelRequestedAt),
    startedAt: isoOrNull(json.startedAt)!,
    committedAt: isoOrNull(json.committedAt),
    finishedAt: isoOrNull(json.finishedAt)
  }
}

/** `to_jsonb` and `jsonb_build_object` render timestamps in PostgreSQL's format; the API speaks ISO 8601. */
export function isoOrNull (value: string | null): string | null {
  return value === null ? null : new Date(value).toISOString()
}
