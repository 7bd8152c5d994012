/**
 * The instance aggregate: the `instances`, `disks` and `interfaces` tables, which this module
 * alone writes (docs/design.md §9), and the reads that start from instances.
 *
 * Creating an instance's rows: the instance, its disks and its interfaces with their addresses,
 * in the caller's transaction. Shared by the API (which inserts them when it accepts a create)
 * and the create workflow (which ensures them, should the API have died before its transaction
 * committed). Inserting twice is harmless: every row is keyed by an ID the request carries, and
 * the second insert finds the first's rows (I3).
 *
 * Everything after the insert is the worker's: an instance's execution changes its runtime fields
 * (activities/instance-records.ts, one change per decision, docs/design.md §8) and, once it is
 * destroyed, releases its disks and addresses in the same transaction; report application marks
 * its disks made once a VMM ran with them; the reconciler releases what a destroyed instance
 * still holds, should that transaction ever have been bypassed.
 *
 * Theory of operation: allocation
 *
 * - Addresses. Each network's row is locked while an address is chosen in it, so two creates
 *   never pick the same one; the partial unique index on live (network, address) makes that a
 *   guarantee. An address asked for must lie inside the network and be neither its network,
 *   broadcast nor gateway address; otherwise the lowest free one is taken. An address stays with
 *   its interface until the instance is destroyed, which is recorded only after its VMMs are
 *   confirmed gone, so a freed address is never handed out while an old VM may still use it.
 * - MACs derive from the interface's ID (domain/interfaces.ts); the unique index on live MACs
 *   refuses a collision rather than sharing one.
 * - Storage. The disks of every live instance share the storage every host mounts; its capacity
 *   is the smallest any host announces (they mount the same storage). Creates that add disks are
 *   serialised on an advisory lock while they check that the disks fit, so two cannot both take
 *   the last room. The rows are the reservation: space comes back when they are destroyed.
 * - Quotas. The instance is charged to its project with its rows, in their transaction, once
 *   (db/quotas.ts), and given back when it is destroyed, with its disks and addresses.
 */
import type { PoolClient, Queryable } from './pool.js'
import type { Instance } from '../domain/instance.js'
import { macOf } from '../domain/interfaces.js'
import type { NewDisk, NewInstance, NewInterface } from '../domain/requests.js'
import type { VmmRecord } from '../domain/vmm.js'
import { chargeOf, DEFAULT_PROJECT_ID, type QuotaResource, type QuotaUse } from '../domain/projects.js'
import { chargeInstance, releaseChargesOfDestroyed, type ProjectQuotas } from './quotas.js'
import { INSTANCE_COLUMNS, toInstance, vmmOfJson } from './rows.js'

/** Why the rows could not be inserted; the API answers with it, naming the field. */
export type InsertProblem =
  | { kind: 'name-taken' }
  | { kind: 'project-gone' }
  | { kind: 'over-quota', exceeded: QuotaResource[], quotas: ProjectQuotas, charge: QuotaUse }
  | { kind: 'storage-full', disk: number, message: string }
  | { kind: 'network-gone' | 'address-invalid' | 'address-taken' | 'no-free-address' | 'mac-taken', interface: number, message: string }

export type InsertOutcome = { inserted: true } | { inserted: false, problem: InsertProblem }

/** Serialises the creates that add disks, while they check the storage's room. */
const STORAGE_LOCK = 0x766d_7064 // "vmpd"

export async function insertInstance (tx: PoolClient, id: string, spec: NewInstance): Promise<InsertOutcome> {
  const projectId = spec.projectId ?? DEFAULT_PROJECT_ID
  const result = await tx.query(
    `INSERT INTO instances (id, project_id, name, vcpus, memory_mib, boot, stop_grace_seconds, restart_policy, on_host_failure, state, intended_state, cloud_init)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'creating', $10, $11)
     ON CONFLICT DO NOTHING`,
    [id, projectId, spec.name, spec.vcpus, spec.memoryMiB, JSON.stringify(spec.boot), spec.stopGraceSeconds, spec.restartPolicy,
      spec.onHostFailure ?? 'fail', spec.intendedState, spec.cloudInit === undefined || spec.cloudInit === null ? null : JSON.stringify(spec.cloudInit)]
  )
  if (result.rowCount !== 1) {
    return await instanceExists(tx, id) ? { inserted: true } : { inserted: false, problem: { kind: 'name-taken' } }
  }
  // Charged with its rows, in their transaction: refused, the caller rolls it all back (db/quotas.ts).
  const charge = chargeOf(spec)
  const charged = await chargeInstance(tx, id, projectId, charge)
  if (!charged.charged) {
    return { inserted: false, problem: charged.reason === 'project-gone' ? { kind: 'project-gone' } : { kind: 'over-quota', exceeded: charged.exceeded, quotas: charged.quotas, charge } }
  }
  const disks = spec.disks ?? []
  const storage = await checkStorage(tx, disks)
  if (storage !== null) return { inserted: false, problem: storage }
  for (const disk of disks) {
    await tx.query(
      `INSERT INTO disks (id, instance_id, name, slot, image, image_sha256, size_gib) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (id) DO NOTHING`,
      [disk.id, id, disk.name, disk.slot, disk.image, disk.imageSha256, disk.sizeGiB]
    )
  }
  for (const [index, nic] of (spec.interfaces ?? []).entries()) {
    const problem = await insertInterface(tx, id, nic, index)
    if (problem !== null) return { inserted: false, problem }
  }
  return { inserted: true }
}

async function checkStorage (tx: PoolClient, disks: readonly NewDisk[]): Promise<InsertProblem | null> {
  if (disks.length === 0) return null
  await tx.query('SELECT pg_advisory_xact_lock($1)', [STORAGE_LOCK])
  const { rows } = await tx.query(
    `SELECT (SELECT min(storage_gib) FROM hosts WHERE status <> 'lost' AND storage_gib IS NOT NULL) AS capacity,
            (SELECT COALESCE(sum(size_gib), 0) FROM disks WHERE destroyed_at IS NULL)::bigint AS used`
  )
  const capacity = rows[0].capacity as number | null
  const free = capacity === null ? 0 : capacity - Number(rows[0].used)
  const wanted = disks.reduce((sum, disk) => sum + disk.sizeGiB, 0)
  if (wanted <= free) return null
  const largest = disks.reduce((a, b) => b.sizeGiB > a.sizeGiB ? b : a)
  const message = capacity === null
    ? 'no host has announced its storage yet'
    : `the disks need ${wanted} GiB and the storage has ${Math.max(free, 0)} GiB free of ${capacity} GiB`
  return { kind: 'storage-full', disk: disks.indexOf(largest), message }
}

async function insertInterface (tx: PoolClient, instanceId: string, nic: NewInterface, index: number): Promise<InsertProblem | null> {
  const fail = (kind: 'network-gone' | 'address-invalid' | 'address-taken' | 'no-free-address' | 'mac-taken', message: string): InsertProblem =>
    ({ kind, interface: index, message })
  if ((await tx.query('SELECT 1 FROM interfaces WHERE id = $1', [nic.id])).rowCount !== 0) return null
  const network = await tx.query('SELECT name FROM networks WHERE id = $1 AND deleted_at IS NULL FOR UPDATE', [nic.networkId])
  if (network.rowCount === 0) return fail('network-gone', `network ${nic.networkId} does not exist`)
  const name = network.rows[0].name as string
  let ip = nic.ip
  if (ip !== null) {
    const { rows } = await tx.query(
      `SELECT $2::inet << cidr AND host($2::inet) NOT IN (host(network(cidr)), host(broadcast(cidr)), host(gateway)) AS usable,
              EXISTS (SELECT 1 FROM interfaces WHERE network_id = $1 AND ip = $2::inet AND released_at IS NULL) AS taken,
              cidr::text AS cidr
         FROM networks WHERE id = $1`,
      [nic.networkId, ip]
    )
    if (rows[0].usable !== true) return fail('address-invalid', `${ip} is not an address network ${name} (${rows[0].cidr}) can give: it must lie inside it and be neither its network, broadcast nor gateway address`)
    if (rows[0].taken === true) return fail('address-taken', `${ip} is taken in network ${name}`)
  } else {
    ip = await lowestFreeAddress(tx, nic.networkId)
    if (ip === null) return fail('no-free-address', `network ${name} has no free address`)
  }
  const mac = macOf(nic.id)
  if ((await tx.query('SELECT 1 FROM interfaces WHERE mac = $1 AND released_at IS NULL', [mac])).rowCount !== 0) {
    return fail('mac-taken', `the MAC ${mac} derived from interface ${nic.id} is in use; retry with another interface ID`)
  }
  await tx.query(
    'INSERT INTO interfaces (id, instance_id, network_id, slot, ip, mac) VALUES ($1, $2, $3, $4, $5, $6)',
    [nic.id, instanceId, nic.networkId, nic.slot, ip, mac]
  )
  return null
}

/**
 * The lowest address of the network that is not its gateway and no live interface has: the first
 * host address if it is free, else the first one after a run of taken ones (the gateway counts
 * as taken), found in one pass over the taken addresses in order. Trying every address of the
 * network in turn cost 86 ms in a /16 with 500 interfaces, more with every create, under the
 * network's lock; this costs about 1 ms with 900.
 */
async function lowestFreeAddress (tx: PoolClient, networkId: string): Promise<string | null> {
  const { rows } = await tx.query(
    `WITH net AS (
       SELECT network(cidr) AS base, (2::bigint ^ (32 - masklen(cidr)))::bigint - 2 AS last_offset, gateway - network(cidr) AS gateway_offset
         FROM networks WHERE id = $1
     ), taken AS (
       SELECT i.ip - net.base AS offset_in FROM interfaces i, net WHERE i.network_id = $1 AND i.released_at IS NULL
       UNION ALL SELECT gateway_offset FROM net
     ), first_free AS (
       SELECT 1::bigint AS offset_in WHERE NOT EXISTS (SELECT 1 FROM taken WHERE offset_in = 1)
       UNION ALL
       (SELECT offset_in + 1 FROM (SELECT offset_in, lead(offset_in) OVER (ORDER BY offset_in) AS next FROM taken) runs
         WHERE next IS DISTINCT FROM offset_in + 1 ORDER BY offset_in LIMIT 1)
     )
     SELECT host(set_masklen(net.base + f.offset_in, 32)) AS ip
       FROM net, first_free f
      WHERE f.offset_in BETWEEN 1 AND net.last_offset
      ORDER BY f.offset_in
      LIMIT 1`,
    [networkId]
  )
  return rows[0]?.ip ?? null
}

/** The ID of the project that owns the instance; null for an instance that does not exist. */
export async function projectOfInstance (db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query('SELECT project_id FROM instances WHERE id = $1', [id])
  return rows[0]?.project_id ?? null
}

export async function instanceExists (db: Queryable, id: string): Promise<boolean> {
  const existing = await db.query('SELECT 1 FROM instances WHERE id = $1', [id])
  return existing.rowCount === 1
}

/**
 * The instance with its VMMs that live and its active one whatever its state, oldest first, in
 * one statement: every change reads it back.
 */
export async function readInstanceWithVmms (db: Queryable, id: string): Promise<{ instance: Instance, vmms: VmmRecord[] } | null> {
  const { rows } = await db.query(
    `SELECT ${INSTANCE_COLUMNS},
       (SELECT COALESCE(jsonb_agg(to_jsonb(v) ORDER BY v.created_at), '[]'::jsonb) FROM vmms v
         WHERE v.instance_id = i.id AND (v.state NOT IN ('destroyed', 'failed', 'lost') OR v.id = i.active_vmm_id)) AS vmms
       FROM instances i WHERE i.id = $1`,
    [id]
  )
  return rows.length === 0 ? null : { instance: toInstance(rows[0]), vmms: rows[0].vmms.map(vmmOfJson) }
}

/** Locks the instance's row for a change; whether it is destroyed, or null when it does not exist. */
export async function lockInstance (tx: PoolClient, id: string): Promise<{ destroyed: boolean } | null> {
  const locked = await tx.query('SELECT destroyed_at FROM instances WHERE id = $1 FOR UPDATE', [id])
  return locked.rowCount === 0 ? null : { destroyed: locked.rows[0].destroyed_at !== null }
}

export async function isInstanceDestroyed (tx: PoolClient, id: string): Promise<boolean> {
  const destroyed = await tx.query('SELECT 1 FROM instances WHERE id = $1 AND destroyed_at IS NOT NULL', [id])
  return destroyed.rowCount !== 0
}

export async function isActiveVmmOf (tx: PoolClient, instanceId: string, vmmId: string): Promise<boolean> {
  const active = await tx.query('SELECT 1 FROM instances WHERE id = $1 AND active_vmm_id = $2', [instanceId, vmmId])
  return active.rowCount !== 0
}

/** The runtime fields a change sets; those absent stay as they are. `destroyed` stamps `destroyed_at`. */
export type RuntimeFieldChanges =
  Partial<Pick<Instance, 'state' | 'intendedState' | 'activeVmmId' | 'lastError' | 'restartAttempts' | 'restartAt'>> & { destroyed?: boolean }

/** Applies a change's fields to the instance; every change moves its generation on. */
export async function updateRuntimeFields (tx: PoolClient, id: string, set: RuntimeFieldChanges): Promise<void> {
  await tx.query(
    `UPDATE instances SET
        state = COALESCE($2, state),
        intended_state = COALESCE($3, intended_state),
        active_vmm_id = CASE WHEN $4 THEN $5::uuid ELSE active_vmm_id END,
        last_error = CASE WHEN $6 THEN $7::jsonb ELSE last_error END,
        destroyed_at = CASE WHEN $8 THEN now() ELSE destroyed_at END,
        restart_attempts = COALESCE($9, restart_attempts),
        restart_at = CASE WHEN $10 THEN $11::timestamptz ELSE restart_at END,
        generation = generation + 1,
        updated_at = now()
      WHERE id = $1`,
    [
      id,
      set.state ?? null,
      set.intendedState ?? null,
      set.activeVmmId !== undefined,
      set.activeVmmId ?? null,
      set.lastError !== undefined,
      set.lastError === undefined || set.lastError === null ? null : JSON.stringify(set.lastError),
      set.destroyed === true,
      set.restartAttempts ?? null,
      set.restartAt !== undefined,
      set.restartAt ?? null
    ]
  )
}

/** Frees a destroyed instance's disks' space, its interfaces' addresses and MACs, and its project's quota. */
export async function releaseDevicesOf (tx: PoolClient, instanceId: string): Promise<void> {
  await tx.query('UPDATE disks SET destroyed_at = now() WHERE instance_id = $1 AND destroyed_at IS NULL', [instanceId])
  await tx.query('UPDATE interfaces SET released_at = now() WHERE instance_id = $1 AND released_at IS NULL', [instanceId])
  await releaseChargesOfDestroyed(tx, instanceId)
}

/** Addresses, disk space and quota still held for destroyed instances: released; how many. */
export async function releaseDevicesOfDestroyedInstances (db: Queryable): Promise<number> {
  const addresses = await db.query(
    'UPDATE interfaces n SET released_at = now() FROM instances i WHERE n.instance_id = i.id AND i.destroyed_at IS NOT NULL AND n.released_at IS NULL'
  )
  const disks = await db.query(
    'UPDATE disks d SET destroyed_at = now() FROM instances i WHERE d.instance_id = i.id AND i.destroyed_at IS NOT NULL AND d.destroyed_at IS NULL'
  )
  return (addresses.rowCount ?? 0) + (disks.rowCount ?? 0) + await releaseChargesOfDestroyed(db, null)
}

/** Marks the instance's disks made: a VMM of it runs, and a VMM runs only once its disks are made. */
export async function markDisksMade (tx: PoolClient, instanceId: string): Promise<void> {
  await tx.query('UPDATE disks SET made_at = now() WHERE instance_id = $1 AND made_at IS NULL AND destroyed_at IS NULL', [instanceId])
}

/** The image of the instance's boot disk while it is not made yet (a host needs it); null otherwise. */
export async function imageToMake (tx: PoolClient, instanceId: string): Promise<string | null> {
  const { rows } = await tx.query(
    'SELECT image FROM disks WHERE instance_id = $1 AND image IS NOT NULL AND made_at IS NULL AND destroyed_at IS NULL',
    [instanceId]
  )
  return rows[0]?.image ?? null
}

/** What the instance has in the storage every host mounts: its disks, and the host of its last VMM (null: none ever). */
export async function storageOf (db: Queryable, instanceId: string): Promise<{ lastHostId: string | null, diskIds: string[] }> {
  const { rows } = await db.query(
    `SELECT (SELECT host_id FROM vmms WHERE instance_id = $1 ORDER BY created_at DESC LIMIT 1) AS last_host,
            (SELECT array_agg(id) FROM disks WHERE instance_id = $1) AS disks`,
    [instanceId]
  )
  const { last_host: lastHostId, disks } = rows[0] as { last_host: string | null, disks: string[] | null }
  return { lastHostId, diskIds: disks ?? [] }
}

/** Of these disk IDs, those of live disks. */
export async function liveDiskIds (db: Queryable, ids: string[]): Promise<Set<string>> {
  const { rows } = await db.query('SELECT id FROM disks WHERE destroyed_at IS NULL AND id = ANY($1::uuid[])', [ids])
  return new Set(rows.map((row) => row.id as string))
}

/** Of these instance IDs, those of live instances. */
export async function liveInstanceIds (db: Queryable, ids: string[]): Promise<Set<string>> {
  const { rows } = await db.query('SELECT id FROM instances WHERE destroyed_at IS NULL AND id = ANY($1::uuid[])', [ids])
  return new Set(rows.map((row) => row.id as string))
}

/**
 * Instances whose state does not meet their intent (or is transitional), untouched for
 * `graceMs`, least recently touched first, 500 at most.
 */
export async function instancesNotMeetingIntent (db: Queryable, graceMs: number): Promise<Array<Pick<Instance, 'id' | 'name' | 'state' | 'intendedState' | 'stopGraceSeconds'>>> {
  const { rows } = await db.query(
    `SELECT i.id, i.name, i.state, i.intended_state, i.stop_grace_seconds FROM instances i
      WHERE i.updated_at < now() - $1 * interval '1 millisecond'
        AND (i.state IN ('creating', 'starting', 'stopping', 'rebooting', 'migrating')
          OR (i.intended_state = 'destroyed' AND i.state <> 'destroyed')
          OR (i.intended_state = 'stopped' AND i.state = 'running')
          OR (i.intended_state = 'running' AND i.state = 'stopped' AND i.last_error IS NULL))
      ORDER BY i.updated_at LIMIT 500`,
    [graceMs]
  )
  return rows.map((row) => ({ id: row.id, name: row.name, state: row.state, intendedState: row.intended_state, stopGraceSeconds: row.stop_grace_seconds }))
}

/** Instances with a VMM alive on the host, oldest first; `activeElsewhere` when their active VMM is not that one. */
export async function instancesWithLiveVmmOn (db: Queryable, hostId: string): Promise<Array<Pick<Instance, 'id' | 'name' | 'state'> & { activeElsewhere: boolean }>> {
  const { rows } = await db.query(
    `SELECT i.id, i.name, i.state, bool_and(v.id IS DISTINCT FROM i.active_vmm_id) AS "activeElsewhere"
       FROM instances i JOIN vmms v ON v.instance_id = i.id
      WHERE v.host_id = $1 AND v.state NOT IN ('destroyed', 'failed', 'lost')
      GROUP BY i.id
      ORDER BY i.created_at, i.id`,
    [hostId]
  )
  return rows
}
