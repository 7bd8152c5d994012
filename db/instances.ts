/**
 * Creating an instance's rows: the instance, its disks and its interfaces with their addresses,
 * in the caller's transaction. Shared by the API (which inserts them when it accepts a create)
 * and the create workflow (which ensures them, should the API have died before its transaction
 * committed). Inserting twice is harmless: every row is keyed by an ID the request carries, and
 * the second insert finds the first's rows (I3).
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
 */
import type { PoolClient } from './pool.js'
import { macOf } from '../domain/interfaces.js'
import type { NewDisk, NewInstance, NewInterface } from '../domain/requests.js'

/** Why the rows could not be inserted; the API answers with it, naming the field. */
export type InsertProblem =
  | { kind: 'name-taken' }
  | { kind: 'storage-full', disk: number, message: string }
  | { kind: 'network-gone' | 'address-invalid' | 'address-taken' | 'no-free-address' | 'mac-taken', interface: number, message: string }

export type InsertOutcome = { inserted: true } | { inserted: false, problem: InsertProblem }

/** Serialises the creates that add disks, while they check the storage's room. */
const STORAGE_LOCK = 0x766d_7064 // "vmpd"

export async function insertInstance (tx: PoolClient, id: string, spec: NewInstance): Promise<InsertOutcome> {
  const result = await tx.query(
    `INSERT INTO instances (id, name, vcpus, memory_mib, boot, stop_grace_seconds, restart_policy, state, intended_state, cloud_init)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'creating', $8, $9)
     ON CONFLICT DO NOTHING`,
    [id, spec.name, spec.vcpus, spec.memoryMiB, JSON.stringify(spec.boot), spec.stopGraceSeconds, spec.restartPolicy,
      spec.intendedState, spec.cloudInit === undefined || spec.cloudInit === null ? null : JSON.stringify(spec.cloudInit)]
  )
  if (result.rowCount !== 1) {
    const existing = await tx.query('SELECT 1 FROM instances WHERE id = $1', [id])
    return existing.rowCount === 1 ? { inserted: true } : { inserted: false, problem: { kind: 'name-taken' } }
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

/** The lowest address of the network that is not its gateway and no live interface has. */
async function lowestFreeAddress (tx: PoolClient, networkId: string): Promise<string | null> {
  const { rows } = await tx.query(
    `SELECT host(candidate) AS ip
       FROM networks n, generate_series(1, (2::bigint ^ (32 - masklen(n.cidr)))::bigint - 2) AS offset_in,
            LATERAL (SELECT set_masklen(network(n.cidr)::inet + offset_in, 32) AS candidate) c
      WHERE n.id = $1
        AND host(candidate) <> host(n.gateway)
        AND NOT EXISTS (SELECT 1 FROM interfaces i WHERE i.network_id = n.id AND i.ip = candidate AND i.released_at IS NULL)
      ORDER BY offset_in
      LIMIT 1`,
    [networkId]
  )
  return rows[0]?.ip ?? null
}
