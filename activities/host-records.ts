/**
 * Host records: liveness from heartbeats (written by each host's monitor workflow) and contact
 * from the calls the control plane makes to the host's agent (written by those activities).
 *
 * A heartbeat registers the host on first contact, keeps its address, capacity, storage and
 * images current,
 * and brings an `unreachable` host back to `active`. A `lost` host stays lost: only an operator
 * fenced it, and only an operator may bring it back (I6). Calls that fail are tracked apart, in
 * `contact_failing_since`: a host may heartbeat and still not answer, and either way the control
 * plane cannot reach it.
 *
 * Neither changes any instance's state (I2). Each instance with a live VMM on the host is told in
 * its events when the host becomes unreachable (silent for the threshold, or calls failing for
 * it) and when it answers again; its conditions show the same (domain/conditions.ts).
 */
import { createHash } from 'node:crypto'
import { recordHostImages } from '../db/images.js'
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js'
import type { HostAnnouncement, HostStatus } from '../domain/host.js'

/** Appends an event to every instance whose active VMM lives on the host. */
async function tellInstancesOn (db: Pool | PoolClient, hostId: string, message: string): Promise<void> {
  await db.query(
    `INSERT INTO instance_events (id, instance_id, kind, state, vmm_id, message, details)
     SELECT gen_random_uuid(), i.id, 'condition-changed', i.state, v.id, $2, jsonb_build_object('hostId', $1::text)
       FROM instances i JOIN vmms v ON v.id = i.active_vmm_id
      WHERE v.host_id = $1 AND v.state NOT IN ('destroyed', 'failed', 'lost')`,
    [hostId, message]
  )
}

export async function recordHostHeartbeat (pool: Pool, announcement: HostAnnouncement): Promise<HostStatus> {
  return await inTransaction(pool, async (tx) => {
    const before = await tx.query('SELECT status FROM hosts WHERE id = $1 FOR UPDATE', [announcement.hostId])
    const { rows } = await tx.query(
      `INSERT INTO hosts (id, agent_url, vcpus, memory_mib, last_heartbeat_at, agent_started_at, storage_gib)
       VALUES ($1, $2, $3, $4, now(), $5, $6)
       ON CONFLICT (id) DO UPDATE SET
         agent_url = EXCLUDED.agent_url,
         vcpus = EXCLUDED.vcpus,
         memory_mib = EXCLUDED.memory_mib,
         storage_gib = EXCLUDED.storage_gib,
         last_heartbeat_at = now(),
         agent_started_at = EXCLUDED.agent_started_at,
         status = CASE WHEN hosts.status = 'unreachable' THEN 'active' ELSE hosts.status END,
         status_since = CASE WHEN hosts.status = 'unreachable' THEN now() ELSE hosts.status_since END
       RETURNING status`,
      [
        announcement.hostId,
        announcement.agentUrl,
        announcement.capacity.vcpus,
        announcement.capacity.memoryMiB,
        announcement.agentStartedAt,
        announcement.storageGiB ?? null
      ]
    )
    const images = announcement.images ?? []
    await recordHostImages(tx, announcement.hostId, images, createHash('sha256').update(JSON.stringify(images)).digest('hex'))
    if (before.rows[0]?.status === 'unreachable') {
      await tellInstancesOn(tx, announcement.hostId, `host ${announcement.hostId} is heard from again`)
    }
    return rows[0].status
  })
}

/** Marks a silent host unreachable, from the moment it was last heard of (if known here). */
export async function markHostUnreachable (pool: Pool, hostId: string, lastHeardAt: string | null): Promise<void> {
  await inTransaction(pool, async (tx) => {
    const { rows } = await tx.query(
      `UPDATE hosts SET status = 'unreachable', status_since = COALESCE($2, last_heartbeat_at, now())
        WHERE id = $1 AND status = 'active'
        RETURNING status_since`,
      [hostId, lastHeardAt]
    )
    if (rows.length > 0) {
      await tellInstancesOn(tx, hostId, `host ${hostId} unreachable: no heartbeat since ${rows[0].status_since}; its instances keep their last known state`)
    }
  })
}

/** A call to the host's agent could not get an answer (refused, timed out, 5xx; another token or no such route). */
export async function noteContactFailed (pool: Pool, hostId: string, unreachableAfterMs: number): Promise<void> {
  await inTransaction(pool, async (tx) => {
    const { rows } = await tx.query(
      `UPDATE hosts SET contact_failing_since = COALESCE(contact_failing_since, now())
        WHERE id = $1
        RETURNING contact_failing_since, contact_failure_noted`,
      [hostId]
    )
    const failing = rows[0]
    if (failing === undefined || failing.contact_failure_noted === true) return
    if (Date.now() - Date.parse(failing.contact_failing_since) < unreachableAfterMs) return
    await tx.query('UPDATE hosts SET contact_failure_noted = true WHERE id = $1', [hostId])
    await tellInstancesOn(tx, hostId, `host ${hostId} unreachable: calls to its agent have failed since ${failing.contact_failing_since}; its instances keep their last known state`)
  })
}

/** A call to the host's agent got an answer. One statement, a no-op unless calls were failing. */
export async function noteContactWorked (pool: Pool, hostId: string): Promise<void> {
  const { rows } = await pool.query(
    `WITH before AS (
       SELECT contact_failure_noted FROM hosts WHERE id = $1 AND contact_failing_since IS NOT NULL FOR UPDATE
     )
     UPDATE hosts SET contact_failing_since = NULL, contact_failure_noted = false
       FROM before
      WHERE hosts.id = $1
      RETURNING before.contact_failure_noted AS was_noted`,
    [hostId]
  )
  if (rows[0]?.was_noted === true) await tellInstancesOn(pool, hostId, `host ${hostId}'s agent answers again`)
}

export async function agentUrlOf (pool: Pool, hostId: string): Promise<string | null> {
  const { rows } = await pool.query('SELECT agent_url FROM hosts WHERE id = $1', [hostId])
  return rows.length === 0 ? null : rows[0].agent_url
}
