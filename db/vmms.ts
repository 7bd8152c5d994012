/**
 * The `vmms` and `reservations` tables: a VMM's record and the host capacity it holds
 * (docs/design.md §9). They are written by the worker's activities only: placement inserts both
 * (activities/vmm-records.ts), report application moves a VMM on and gives its reservation back
 * once it is gone, an instance's destroyed change releases what its VMMs held
 * (activities/instance-records.ts), fencing a lost host makes its VMMs `lost`
 * (activities/host-fencing.ts), and the reconciler releases reservations leaked by VMMs gone.
 *
 * A report moves a VMM only forward: the statement applies it only at a newer generation than the
 * record's, or as a conclusion of the control plane's, and never to a VMM already gone (I4).
 */
import type { VmmRecord, VmmReport } from '../domain/vmm.js'
import { VMM_COLUMNS, toVmm } from './rows.js'
import type { PoolClient, Queryable } from './pool.js'

/** The host of the VMM with this ID, or null when there is no such VMM (not placed yet). */
export async function hostOfVmm (tx: PoolClient, vmmId: string): Promise<string | null> {
  const existing = await tx.query('SELECT host_id FROM vmms WHERE id = $1', [vmmId])
  return existing.rowCount === 0 ? null : existing.rows[0].host_id as string
}

/** Inserts a placed VMM (`starting`) and the capacity it reserves on its host. */
export async function insertVmmWithReservation (
  tx: PoolClient,
  vmm: { id: string, instanceId: string, hostId: string, vcpus: number, memoryMiB: number }
): Promise<void> {
  await tx.query("INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, $3, 'starting')", [vmm.id, vmm.instanceId, vmm.hostId])
  await tx.query(
    'INSERT INTO reservations (vmm_id, host_id, vcpus, memory_mib) VALUES ($1, $2, $3, $4)',
    [vmm.id, vmm.hostId, vmm.vcpus, vmm.memoryMiB]
  )
}

/**
 * Applies a report to its VMM's record if it is newer (or a conclusion) and the VMM is not gone;
 * the record it left and since when its API was unresponsive before, or null when it changed
 * nothing. A terminal report stamps `destroyed_at`. The row is locked before it is read, so the
 * value before is the one the update replaced, whoever wrote it last.
 */
export async function applyReportToVmm (tx: PoolClient, report: VmmReport, terminal: boolean): Promise<{ vmm: VmmRecord, unresponsiveBefore: string | null } | null> {
  const { rows } = await tx.query(
    `WITH before AS (SELECT id, unresponsive_since FROM vmms WHERE id = $1 FOR UPDATE)
     UPDATE vmms v SET
        state = $3, generation = GREATEST(v.generation, $2), reason = $4, exit = $5, unresponsive_since = $6,
        migration = CASE WHEN $8 THEN $9::jsonb ELSE migration END,
        destroyed_at = CASE WHEN $7 THEN COALESCE(destroyed_at, now()) END,
        running_since = CASE WHEN $3 = 'running' THEN COALESCE(running_since, now()) ELSE running_since END,
        updated_at = now()
       FROM before
      WHERE v.id = before.id AND (v.generation < $2 OR $10)
        AND v.state NOT IN ('destroyed', 'failed', 'lost')
      RETURNING ${VMM_COLUMNS}, before.unresponsive_since AS unresponsive_before`,
    [
      report.vmmId,
      report.generation,
      report.state,
      report.reason,
      report.exit === null ? null : JSON.stringify(report.exit),
      report.unresponsiveSince,
      terminal,
      report.migration !== undefined,
      report.migration == null ? null : JSON.stringify(report.migration),
      report.concluded === true
    ]
  )
  return rows.length === 0 ? null : { vmm: toVmm(rows[0]), unresponsiveBefore: rows[0].unresponsive_before }
}

/** The VMM's record, or null for a VMM not known. */
export async function findVmm (db: Queryable, vmmId: string): Promise<VmmRecord | null> {
  const current = await db.query(`SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.id = $1`, [vmmId])
  return current.rows.length === 0 ? null : toVmm(current.rows[0])
}

/** The VMMs of these instances not gone yet: a migration's target among them. */
export async function liveVmmsOf (db: Queryable, instanceIds: readonly string[]): Promise<VmmRecord[]> {
  const { rows } = await db.query(
    `SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.instance_id = ANY($1::uuid[]) AND v.state NOT IN ('destroyed', 'failed', 'lost')`,
    [instanceIds]
  )
  return rows.map(toVmm)
}

export async function readVmms (db: Queryable, vmmIds: string[]): Promise<VmmRecord[]> {
  const { rows } = await db.query(`SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.id = ANY($1::uuid[])`, [vmmIds])
  return rows.map(toVmm)
}

/** Gives back the capacity a VMM that is gone held. */
export async function releaseReservation (tx: PoolClient, vmmId: string): Promise<void> {
  await tx.query('DELETE FROM reservations WHERE vmm_id = $1', [vmmId])
}

/** Gives back what the instance's VMMs held (they are confirmed gone). */
export async function releaseReservationsOfInstance (tx: PoolClient, instanceId: string): Promise<void> {
  await tx.query('DELETE FROM reservations r USING vmms v WHERE r.vmm_id = v.id AND v.instance_id = $1', [instanceId])
}

/**
 * Fences the live VMMs of a host declared lost: `lost` (terminal), with `reason`, their
 * reservations released. The host's row is marked in the same transaction (db/hosts.ts).
 */
export async function fenceVmmsOnHost (tx: PoolClient, hostId: string, reason: string): Promise<void> {
  await tx.query(
    `UPDATE vmms v SET state = 'lost', reason = $2, destroyed_at = now(), updated_at = now()
      WHERE v.host_id = $1 AND v.state NOT IN ('destroyed', 'failed', 'lost')`,
    [hostId, reason]
  )
  await tx.query('DELETE FROM reservations WHERE host_id = $1', [hostId])
}

/** The host's lost VMMs its agent has not destroyed yet (not fenced). */
export async function unfencedLostVmmsOn (db: Queryable, hostId: string): Promise<VmmRecord[]> {
  const { rows } = await db.query(`SELECT ${VMM_COLUMNS} FROM vmms v WHERE v.host_id = $1 AND v.state = 'lost' AND v.fenced_at IS NULL`, [hostId])
  return rows.map(toVmm)
}

/** Records that the lost VMM's agent destroyed it. */
export async function markVmmFenced (db: Queryable, vmmId: string): Promise<void> {
  await db.query('UPDATE vmms SET fenced_at = now() WHERE id = $1', [vmmId])
}

/** Reservations still held for VMMs that are gone: released; how many. */
export async function releaseReservationsOfGoneVmms (db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    "DELETE FROM reservations r USING vmms v WHERE r.vmm_id = v.id AND v.state IN ('destroyed', 'failed', 'lost')"
  )
  return rowCount ?? 0
}

/** The host's VMMs PostgreSQL holds as live, and those `listed`, with whether their instance is destroyed, by ID. */
export async function knownVmmsOn (db: Queryable, hostId: string, listed: string[]): Promise<Map<string, { vmm: VmmRecord, instanceDestroyed: boolean }>> {
  const { rows } = await db.query(
    `SELECT ${VMM_COLUMNS}, i.destroyed_at IS NOT NULL AS instance_destroyed
       FROM vmms v JOIN instances i ON i.id = v.instance_id
      WHERE v.host_id = $1 AND (v.state NOT IN ('destroyed', 'failed', 'lost') OR v.id = ANY($2::uuid[]))`,
    [hostId, listed]
  )
  return new Map(rows.map((row) => [row.id, { vmm: toVmm(row), instanceDestroyed: row.instance_destroyed }]))
}

/**
 * Active VMMs fenced with their lost host while their instance's record still reads them live,
 * the instance untouched for `graceMs`, oldest first, 500 at most; with the instance's name.
 */
export async function activeVmmsLostUnnoticed (db: Queryable, graceMs: number): Promise<Array<{ vmm: VmmRecord, instanceName: string }>> {
  const { rows } = await db.query(
    `SELECT ${VMM_COLUMNS}, i.name AS instance_name FROM instances i JOIN vmms v ON v.id = i.active_vmm_id
      WHERE v.state = 'lost' AND i.destroyed_at IS NULL
        AND i.state IN ('starting', 'running', 'rebooting', 'stopping', 'migrating')
        AND i.updated_at < now() - $1 * interval '1 millisecond'
      ORDER BY i.updated_at LIMIT 500`,
    [graceMs]
  )
  return rows.map((row) => ({ vmm: toVmm(row), instanceName: row.instance_name }))
}

/**
 * The VMM whose console an instance has (its active one, or its latest) with its host's agent:
 * `instanceExists` false for an instance that does not exist, `vmm` null for one that never had a VMM.
 */
export async function consoleVmmOf (db: Queryable, instanceId: string): Promise<{ instanceExists: boolean, vmm: { id: string, state: string, agentUrl: string } | null }> {
  const { rows } = await db.query(
    `SELECT v.id, v.state, h.agent_url, i.id IS NOT NULL AS exists
       FROM (SELECT $1::uuid AS id) wanted
       LEFT JOIN instances i ON i.id = wanted.id
       LEFT JOIN LATERAL (
         SELECT v.* FROM vmms v WHERE v.instance_id = i.id ORDER BY (v.id = i.active_vmm_id) DESC, v.created_at DESC LIMIT 1
       ) v ON true
       LEFT JOIN hosts h ON h.id = v.host_id`,
    [instanceId]
  )
  const row = rows[0]
  return { instanceExists: row.exists === true, vmm: row.id === null ? null : { id: row.id, state: row.state, agentUrl: row.agent_url } }
}
