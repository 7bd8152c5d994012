/**
 * The `hosts` table: every statement that reads or writes a host's row (docs/design.md §9).
 *
 * A host's liveness (registration, heartbeats, unreachable, lost, readmitted) and the contact
 * the control plane has with its agent are written by the worker's activities
 * (activities/host-records.ts, activities/host-fencing.ts); its cordon (`cordoned_at`,
 * `cordon_reason`) by the API (api/services/host-drains.ts); the digest of its images with its
 * images (db/images.ts). The rules each write keeps are in the comments of the modules that call
 * it; the statements here keep them: a `lost` host stays lost until readmitted, a heartbeat brings
 * only an `unreachable` host back to `active`.
 */
import type { HostAnnouncement, HostStatus, LostBy } from '../domain/host.js'
import type { LeaseRecord } from '../domain/host-lease.js'
import type { HostRoom } from '../domain/placement.js'
import { HOST_COLUMNS } from './rows.js'
import type { PoolClient, Queryable } from './pool.js'

/** Locks the host's row; its status before the caller's change, or null for a host not registered yet. */
export async function lockHostStatus (tx: PoolClient, hostId: string): Promise<HostStatus | null> {
  const { rows } = await tx.query('SELECT status FROM hosts WHERE id = $1 FOR UPDATE', [hostId])
  return rows[0]?.status ?? null
}

/**
 * Registers the host on its first heartbeat, or keeps it current; its status after. Whether it
 * keeps a lease, and with which watchdog, is recorded from its heartbeat too, before its first
 * renewal: placement takes a host that keeps one only while it holds it (docs/design.md §17).
 */
export async function upsertHostFromHeartbeat (tx: PoolClient, announcement: HostAnnouncement): Promise<HostStatus> {
  const { rows } = await tx.query(
    `INSERT INTO hosts (id, agent_url, vcpus, memory_mib, last_heartbeat_at, agent_started_at, storage_gib, lease_watchdog_ms)
     VALUES ($1, $2, $3, $4, now(), $5, $6, $7)
     ON CONFLICT (id) DO UPDATE SET
       agent_url = EXCLUDED.agent_url,
       vcpus = EXCLUDED.vcpus,
       memory_mib = EXCLUDED.memory_mib,
       storage_gib = EXCLUDED.storage_gib,
       last_heartbeat_at = now(),
       agent_started_at = EXCLUDED.agent_started_at,
       lease_watchdog_ms = EXCLUDED.lease_watchdog_ms,
       status = CASE WHEN hosts.status = 'unreachable' THEN 'active' ELSE hosts.status END,
       status_since = CASE WHEN hosts.status = 'unreachable' THEN now() ELSE hosts.status_since END
     RETURNING status`,
    [
      announcement.hostId,
      announcement.agentUrl,
      announcement.capacity.vcpus,
      announcement.capacity.memoryMiB,
      announcement.agentStartedAt,
      announcement.storageGiB ?? null,
      announcement.lease?.watchdogMs ?? null
    ]
  )
  return rows[0].status
}

/** Records a new digest of the host's images; false when it is the one recorded (nothing changed). */
export async function setImagesDigest (tx: PoolClient, hostId: string, digest: string): Promise<boolean> {
  const changed = await tx.query('UPDATE hosts SET images_digest = $2 WHERE id = $1 AND images_digest IS DISTINCT FROM $2', [hostId, digest])
  return changed.rowCount !== 0
}

/**
 * Marks an `active` host unreachable, from the moment it was last heard of (if known); since when
 * it is, or null when it was not `active`.
 */
export async function setHostUnreachable (tx: PoolClient, hostId: string, lastHeardAt: string | null): Promise<string | null> {
  const { rows } = await tx.query(
    `UPDATE hosts SET status = 'unreachable', status_since = COALESCE($2, last_heartbeat_at, now())
      WHERE id = $1 AND status = 'active'
      RETURNING status_since`,
    [hostId, lastHeardAt]
  )
  return rows[0]?.status_since ?? null
}

/** Notes that calls to the host's agent fail, from the first failure on; null for an unknown host. */
export async function noteContactFailing (tx: PoolClient, hostId: string): Promise<{ since: string, noted: boolean } | null> {
  const { rows } = await tx.query(
    `UPDATE hosts SET contact_failing_since = COALESCE(contact_failing_since, now())
      WHERE id = $1
      RETURNING contact_failing_since, contact_failure_noted`,
    [hostId]
  )
  return rows.length === 0 ? null : { since: rows[0].contact_failing_since, noted: rows[0].contact_failure_noted === true }
}

/** Remembers that the host's instances were told its calls fail, so they are told once. */
export async function setContactFailureNoted (tx: PoolClient, hostId: string): Promise<void> {
  await tx.query('UPDATE hosts SET contact_failure_noted = true WHERE id = $1', [hostId])
}

/**
 * Clears the host's failing contact. One statement, a no-op unless calls were failing; true when
 * the host's instances had been told they were.
 */
export async function clearContactFailing (db: Queryable, hostId: string): Promise<boolean> {
  const { rows } = await db.query(
    `WITH before AS (
       SELECT contact_failure_noted FROM hosts WHERE id = $1 AND contact_failing_since IS NOT NULL FOR UPDATE
     )
     UPDATE hosts SET contact_failing_since = NULL, contact_failure_noted = false
       FROM before
      WHERE hosts.id = $1
      RETURNING before.contact_failure_noted AS was_noted`,
    [hostId]
  )
  return rows[0]?.was_noted === true
}

export async function agentUrlOf (db: Queryable, hostId: string): Promise<string | null> {
  const { rows } = await db.query('SELECT agent_url FROM hosts WHERE id = $1', [hostId])
  return rows.length === 0 ? null : rows[0].agent_url
}

/**
 * Declares the host lost, saying by whom and why (its VMMs are fenced in the same transaction,
 * db/vmms.ts). An operator's declaration of a host its lease declared takes it over: the host then
 * waits for an operator to re-admit it, as one an operator declared does.
 */
export async function setHostLost (tx: PoolClient, hostId: string, by: LostBy, reason: string): Promise<void> {
  await tx.query(
    `UPDATE hosts SET status = 'lost', status_since = CASE WHEN status = 'lost' THEN status_since ELSE now() END, lost_by = $2, lost_reason = $3
      WHERE id = $1 AND (status <> 'lost' OR ($2 = 'operator' AND lost_by = 'lease'))`,
    [hostId, by, reason]
  )
}

/** The control plane's grant of a host's lease, as recorded (docs/design.md §17). */
export interface RecordedGrant {
  /** On PostgreSQL's clock, ms since the epoch. */
  grantedAt: number
  /** Every other host, registered before the grant: those its agent asks when its lease lapses. */
  peers: Array<{ hostId: string, agentUrl: string }>
}

/**
 * Records a grant of the host's lease for `termMs`, for an agent that pets a watchdog of
 * `watchdogMs`, and the control plane's liveness: a grant after `outageGapMs` with none to anyone
 * starts its uptime again, and every lease with it.
 */
export async function recordLeaseGrant (tx: PoolClient, hostId: string, grant: { watchdogMs: number, termMs: number, outageGapMs: number }): Promise<RecordedGrant> {
  await tx.query(
    `INSERT INTO lease_clock (last_grant_at, up_since) VALUES (clock_timestamp(), clock_timestamp())
     ON CONFLICT (id) DO UPDATE SET
       up_since = CASE WHEN lease_clock.last_grant_at < clock_timestamp() - make_interval(secs => $1::double precision / 1000)
                       THEN clock_timestamp() ELSE lease_clock.up_since END,
       last_grant_at = clock_timestamp()`,
    [grant.outageGapMs]
  )
  const { rows } = await tx.query(
    `UPDATE hosts SET lease_granted_at = clock_timestamp(), lease_watchdog_ms = $2, lease_term_ms = $3 WHERE id = $1
     RETURNING (extract(epoch FROM lease_granted_at) * 1000)::float8 AS granted_ms`,
    [hostId, grant.watchdogMs, grant.termMs]
  )
  const peers = await tx.query('SELECT id, agent_url FROM hosts WHERE id <> $1 ORDER BY id', [hostId])
  return { grantedAt: rows[0].granted_ms, peers: peers.rows.map((row) => ({ hostId: row.id, agentUrl: row.agent_url })) }
}

/** A host's lease as recorded, with PostgreSQL's clock now and when it was registered, epoch ms. */
export interface LeaseRow {
  now: number
  registeredAt: number
  grantedAt: number | null
  ackedGrantAt: number | null
  heldSince: number | null
  holdsUntil: number | null
  /** The term of the last grant, as its API counted it. */
  termMs: number | null
}

/** The lease's record, as the rules read it (domain/host-lease.ts). */
export function leaseRecordOf (row: LeaseRow): LeaseRecord {
  return { grantedAt: row.grantedAt, ackedGrantAt: row.ackedGrantAt, heldSince: row.heldSince, holdsUntil: row.holdsUntil }
}

const LEASE_ROW = `(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now_ms,
  (extract(epoch FROM registered_at) * 1000)::float8 AS registered_ms,
  (extract(epoch FROM lease_granted_at) * 1000)::float8 AS granted_ms,
  (extract(epoch FROM lease_acked_grant_at) * 1000)::float8 AS acked_grant_ms,
  (extract(epoch FROM lease_held_since) * 1000)::float8 AS held_since_ms,
  (extract(epoch FROM lease_holds_until) * 1000)::float8 AS holds_until_ms,
  lease_term_ms`

function toLeaseRow (row: Record<string, any>): LeaseRow {
  return { now: row.now_ms, registeredAt: row.registered_ms, grantedAt: row.granted_ms, ackedGrantAt: row.acked_grant_ms, heldSince: row.held_since_ms, holdsUntil: row.holds_until_ms, termMs: row.lease_term_ms }
}

/** Locks the host's row; its lease as recorded, or null for a host not registered. */
export async function lockLease (tx: PoolClient, hostId: string): Promise<LeaseRow | null> {
  const { rows } = await tx.query(`SELECT ${LEASE_ROW} FROM hosts WHERE id = $1 FOR UPDATE`, [hostId])
  return rows.length === 0 ? null : toLeaseRow(rows[0])
}

/** Records an acknowledgement: the last grant acknowledged, and how long the agent surely holds its lease. */
export async function setLeaseHeld (tx: PoolClient, hostId: string, held: { ackedGrantAt: number, heldSince: number, holdsUntil: number }): Promise<void> {
  await tx.query(
    `UPDATE hosts SET lease_acked_grant_at = to_timestamp($2::float8 / 1000), lease_held_since = to_timestamp($3::float8 / 1000),
       lease_holds_until = to_timestamp($4::float8 / 1000) WHERE id = $1`,
    [hostId, held.ackedGrantAt, held.heldSince, held.holdsUntil]
  )
}

/** What a judgement of the host's lease needs: its record, the control plane's uptime and its peers'. */
export interface LeaseFactsRows {
  host: LeaseRow & { status: HostStatus, watchdogMs: number | null }
  upSince: number
  peers: LeaseRow[]
}

export async function leaseFactsOf (tx: PoolClient, hostId: string): Promise<LeaseFactsRows | null> {
  const { rows } = await tx.query(`SELECT ${LEASE_ROW}, status, lease_watchdog_ms FROM hosts WHERE id = $1 FOR UPDATE`, [hostId])
  if (rows.length === 0) return null
  const clock = await tx.query('SELECT (extract(epoch FROM up_since) * 1000)::float8 AS up_since_ms FROM lease_clock')
  const peers = await tx.query(
    `SELECT ${LEASE_ROW} FROM hosts WHERE id <> $1 AND registered_at <= (SELECT lease_granted_at FROM hosts WHERE id = $1)`,
    [hostId]
  )
  return {
    host: { ...toLeaseRow(rows[0]), status: rows[0].status, watchdogMs: rows[0].lease_watchdog_ms },
    upSince: clock.rows[0]?.up_since_ms ?? 0,
    peers: peers.rows.map(toLeaseRow)
  }
}

/**
 * Brings a lost host back to `active`, but only once none of its lost VMMs is unfenced, and with
 * `by`, only if that is who declared it; whether it did. A host its lease declared comes back
 * only once it holds a lease again (if it still keeps one): heard through Temporal while it cannot
 * renew, it would only be declared lost again a bound later.
 */
export async function readmitFencedHost (db: Queryable, hostId: string, by: LostBy | null = null): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE hosts SET status = 'active', status_since = now(), lost_by = NULL, lost_reason = NULL
      WHERE id = $1 AND status = 'lost' AND ($2::text IS NULL OR lost_by = $2)
        AND ($2::text IS DISTINCT FROM 'lease' OR lease_watchdog_ms IS NULL OR lease_holds_until > clock_timestamp())
        AND NOT EXISTS (SELECT 1 FROM vmms WHERE host_id = $1 AND state = 'lost' AND fenced_at IS NULL)`,
    [hostId, by]
  )
  return rowCount === 1
}

export async function activeHostIds (db: Queryable): Promise<string[]> {
  const { rows } = await db.query("SELECT id FROM hosts WHERE status = 'active' ORDER BY id")
  return rows.map((row) => row.id)
}

export async function countActiveHosts (db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM hosts WHERE status = 'active'")
  return rows[0]?.n ?? 0
}

/** An active host, `preferred` if it is one; null when no host is active. */
export async function activeHostPreferring (db: Queryable, preferred: string): Promise<string | null> {
  const { rows } = await db.query("SELECT id FROM hosts WHERE status = 'active' ORDER BY id = $1 DESC, id LIMIT 1", [preferred])
  return rows[0]?.id ?? null
}

/** What decides whether the host may take a VMM now; null for a host that does not exist. */
export async function placementStatusOf (db: Queryable, hostId: string): Promise<{ status: HostStatus, cordonedAt: string | null } | null> {
  const { rows } = await db.query('SELECT status, cordoned_at FROM hosts WHERE id = $1', [hostId])
  return rows.length === 0 ? null : { status: rows[0].status, cordonedAt: rows[0].cordoned_at }
}

/** Locks the active hosts, which serialises placements, so two can't both take the last room. */
export async function lockActiveHosts (tx: PoolClient): Promise<void> {
  await tx.query("SELECT id FROM hosts WHERE status = 'active' ORDER BY id FOR UPDATE")
}

/**
 * The active, uncordoned hosts that may boot the instance, with the room each has left, by ID; a
 * host that keeps a lease only while the record shows it held (its agent refuses a new VMM
 * otherwise, docs/design.md §17). A
 * boot disk not made yet is made from its base image on the host that boots it, so that host
 * needs the image (the same version the create was checked against); once made, the disk is in
 * the shared storage and any host can run it. `onlyHostId` and `excludeHostId` narrow the choice
 * (a migration's target).
 */
export async function hostsThatMayBoot (tx: PoolClient, instanceId: string, onlyHostId: string | null, excludeHostId: string | null): Promise<HostRoom[]> {
  const { rows } = await tx.query(
    `SELECT h.id,
            h.vcpus - COALESCE(sum(r.vcpus), 0) AS free_vcpus,
            h.memory_mib - COALESCE(sum(r.memory_mib), 0) AS free_memory_mib
       FROM hosts h LEFT JOIN reservations r ON r.host_id = h.id
      WHERE h.status = 'active' AND h.cordoned_at IS NULL
        AND (h.lease_watchdog_ms IS NULL OR h.lease_holds_until > clock_timestamp())
        AND ($2::text IS NULL OR h.id = $2) AND ($3::text IS NULL OR h.id <> $3)
        AND NOT EXISTS (
          SELECT 1 FROM disks d
           WHERE d.instance_id = $1 AND d.image IS NOT NULL AND d.made_at IS NULL AND d.destroyed_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM host_images hi WHERE hi.host_id = h.id AND hi.name = d.image AND hi.sha256 = d.image_sha256))
      GROUP BY h.id
      ORDER BY h.id`,
    [instanceId, onlyHostId, excludeHostId]
  )
  return rows.map((row) => ({ id: row.id, freeVcpus: row.free_vcpus, freeMemoryMiB: row.free_memory_mib }))
}

/** Cordons the host for a drain (its reason becomes `draining`); false for a host that does not exist. */
export async function cordonForDrain (tx: PoolClient, hostId: string): Promise<boolean> {
  const host = await tx.query("UPDATE hosts SET cordoned_at = COALESCE(cordoned_at, now()), cordon_reason = 'draining' WHERE id = $1 RETURNING status", [hostId])
  return host.rowCount !== 0
}

/** Cordons the host, keeping the reason of a cordon it has; false for a host that does not exist. */
export async function cordonHost (db: Queryable, hostId: string): Promise<boolean> {
  const host = await db.query("UPDATE hosts SET cordoned_at = COALESCE(cordoned_at, now()), cordon_reason = COALESCE(cordon_reason, 'cordoned') WHERE id = $1", [hostId])
  return host.rowCount !== 0
}

/** Ends the host's cordon; whether a drain of it is open, or null for a host that does not exist. */
export async function uncordonHost (db: Queryable, hostId: string): Promise<{ draining: boolean } | null> {
  const host = await db.query<{ draining: boolean }>(`UPDATE hosts SET cordoned_at = NULL, cordon_reason = NULL WHERE id = $1
    RETURNING EXISTS (SELECT 1 FROM drains WHERE host_id = $1 AND finished_at IS NULL) AS draining`, [hostId])
  return host.rows[0] ?? null
}

/**
 * A host as `GET /v1/hosts` shows it: its record, its cordon, who declared it lost and why, its
 * lease (epoch ms, with PostgreSQL's clock now), how many live VMMs it has and its latest drain
 * (`drain`, the row as JSON).
 */
const HOST_VIEW_QUERY = `
  SELECT ${HOST_COLUMNS}, h.cordoned_at, h.lost_by, h.lost_reason, h.lease_watchdog_ms,
         ${LEASE_ROW},
         (SELECT count(*) FROM vmms v WHERE v.host_id = h.id AND v.state NOT IN ('destroyed', 'failed', 'lost'))::int AS live_vmms,
         (SELECT to_jsonb(d) FROM drains d WHERE d.host_id = h.id ORDER BY d.started_at DESC LIMIT 1) AS drain
    FROM hosts h`

export async function listHostViewRows (db: Queryable): Promise<Array<Record<string, any>>> {
  const { rows } = await db.query(`${HOST_VIEW_QUERY} ORDER BY h.id`)
  return rows
}

export async function findHostViewRow (db: Queryable, hostId: string): Promise<Record<string, any> | null> {
  const { rows } = await db.query(`${HOST_VIEW_QUERY} WHERE h.id = $1`, [hostId])
  return rows[0] ?? null
}
