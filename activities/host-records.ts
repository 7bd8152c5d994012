/**
 * Host records, written by each host's monitor workflow from its agent's heartbeats.
 *
 * A heartbeat registers the host on first contact, keeps its address and capacity current,
 * and brings an `unreachable` host back to `active`. A `lost` host stays lost: only an operator
 * fenced it, and only an operator may bring it back (I6).
 */
import type { Pool } from '../db/pool.js'
import type { HostAnnouncement, HostStatus } from '../domain/host.js'

export async function recordHostHeartbeat (pool: Pool, announcement: HostAnnouncement): Promise<HostStatus> {
  const { rows } = await pool.query(
    `INSERT INTO hosts (id, agent_url, vcpus, memory_mib, last_heartbeat_at, agent_started_at)
     VALUES ($1, $2, $3, $4, now(), $5)
     ON CONFLICT (id) DO UPDATE SET
       agent_url = EXCLUDED.agent_url,
       vcpus = EXCLUDED.vcpus,
       memory_mib = EXCLUDED.memory_mib,
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
      announcement.agentStartedAt
    ]
  )
  return rows[0].status
}

/** Marks a silent host unreachable, from the moment it was last heard of (if known here). */
export async function markHostUnreachable (pool: Pool, hostId: string, lastHeardAt: string | null): Promise<void> {
  await pool.query(
    `UPDATE hosts SET status = 'unreachable', status_since = COALESCE($2, last_heartbeat_at, now())
      WHERE id = $1 AND status = 'active'`,
    [hostId, lastHeardAt]
  )
}

export async function agentUrlOf (pool: Pool, hostId: string): Promise<string | null> {
  const { rows } = await pool.query('SELECT agent_url FROM hosts WHERE id = $1', [hostId])
  return rows.length === 0 ? null : rows[0].agent_url
}
