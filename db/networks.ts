/**
 * Networks: IPv4 address spaces the instances' interfaces take their addresses from
 * (db/instances.ts allocates them), each owned by a project. PostgreSQL keeps live networks'
 * names unique in their project and their ranges apart across the fleet (`networks_no_overlap`);
 * a network with live interfaces cannot be deleted, and none is made in a project being deleted.
 */
import { GUEST_MTU, type NetworkOutbound } from '../domain/network-segments.js'
import { inTransaction, type Pool, type Queryable } from './pool.js'

export interface Network {
  id: string
  name: string
  cidr: string
  gateway: string
  /** Its VXLAN network identifier, chosen with it and never reused (domain/network-segments.ts). */
  vni: number
  mtu: number
  outbound: NetworkOutbound
  /** Addresses given to live interfaces, and how many the network has to give. */
  addressesInUse: number
  addressesTotal: number
  createdAt: string
}

export type NetworkInsertProblem = { kind: 'name-taken' } | { kind: 'overlaps', with: string } | { kind: 'project-gone' }

const NETWORK_COLUMNS = `n.id, n.name, n.cidr::text AS cidr, host(n.gateway) AS gateway, n.vni, n.outbound, n.created_at,
  (SELECT count(*) FROM interfaces i WHERE i.network_id = n.id AND i.released_at IS NULL)::int AS in_use,
  ((2::bigint ^ (32 - masklen(n.cidr)))::bigint - 3)::int AS total`

function toNetwork (row: Record<string, any>): Network {
  return {
    id: row.id,
    name: row.name,
    cidr: row.cidr,
    gateway: row.gateway,
    vni: row.vni,
    mtu: GUEST_MTU,
    outbound: row.outbound,
    addressesInUse: row.in_use,
    addressesTotal: row.total,
    createdAt: row.created_at
  }
}

export async function insertNetwork (db: Pool, network: { id: string, projectId: string, name: string, cidr: string, gateway: string, outbound: NetworkOutbound }): Promise<Network | NetworkInsertProblem> {
  const client = await db.connect()
  try {
    // The project's quotas row, shared-locked: a project's deletion locks and deletes it (db/projects.ts).
    const inserted = await client.query(
      `INSERT INTO networks (id, project_id, name, cidr, gateway, outbound)
       SELECT $1, $2, $3, $4, $5, $6 FROM project_quotas WHERE project_id = $2 FOR SHARE
       ON CONFLICT (id) DO NOTHING`,
      [network.id, network.projectId, network.name, network.cidr, network.gateway, network.outbound]
    )
    if (inserted.rowCount === 0 && (await client.query('SELECT 1 FROM networks WHERE id = $1', [network.id])).rowCount === 0) return { kind: 'project-gone' }
  } catch (err) {
    const { code, constraint } = err as { code?: string, constraint?: string }
    if (code === '23505' && constraint === 'networks_live_name') return { kind: 'name-taken' }
    if (code === '23P01' && constraint === 'networks_no_overlap') {
      const { rows } = await client.query(
        "SELECT name || ' (' || cidr::text || ')' AS what FROM networks WHERE deleted_at IS NULL AND cidr && $1::cidr LIMIT 1",
        [network.cidr]
      )
      return { kind: 'overlaps', with: rows[0]?.what ?? 'another network' }
    }
    throw err
  } finally {
    client.release()
  }
  return (await findNetwork(db, network.projectId, network.id))!
}

/** The project's live networks, by name. */
export async function listNetworks (db: Pool, projectId: string): Promise<Network[]> {
  const { rows } = await db.query(`SELECT ${NETWORK_COLUMNS} FROM networks n WHERE n.deleted_at IS NULL AND n.project_id = $1 ORDER BY n.name`, [projectId])
  return rows.map(toNetwork)
}

/** A live network of the project, by ID or by name. */
export async function findNetwork (db: Pool, projectId: string, idOrName: string): Promise<Network | null> {
  const { rows } = await db.query(`SELECT ${NETWORK_COLUMNS} FROM networks n WHERE n.deleted_at IS NULL AND n.project_id = $2 AND ${matchOf(idOrName)}`, [idOrName, projectId])
  return rows.length === 0 ? null : toNetwork(rows[0])
}

/**
 * The ID of a live network of the project, by ID or by name: what a create needs, without
 * counting the addresses in use, which grows with the instances in the network.
 */
export async function findNetworkId (db: Queryable, projectId: string, idOrName: string): Promise<string | null> {
  const { rows } = await db.query(`SELECT n.id FROM networks n WHERE n.deleted_at IS NULL AND n.project_id = $2 AND ${matchOf(idOrName)}`, [idOrName, projectId])
  return rows.length === 0 ? null : rows[0].id
}

function matchOf (idOrName: string): string {
  return /^[0-9a-f-]{36}$/i.test(idOrName) ? 'n.id = $1::uuid' : 'n.name = $1'
}

/**
 * Deletes a network no live interface uses: `deleted` when it did, `in-use` with how many
 * interfaces hold addresses, `missing` when there is no such live network.
 */
export async function deleteNetwork (db: Pool, id: string): Promise<'deleted' | 'missing' | { inUse: number }> {
  return await inTransaction(db, async (tx) => {
    const locked = await tx.query('SELECT 1 FROM networks WHERE id = $1 AND deleted_at IS NULL FOR UPDATE', [id])
    if (locked.rowCount === 0) return 'missing'
    // The lock keeps a create from taking an address in the network meanwhile (db/instances.ts).
    const { rows } = await tx.query('SELECT count(*)::int AS n FROM interfaces WHERE network_id = $1 AND released_at IS NULL', [id])
    if (rows[0].n > 0) return { inUse: rows[0].n as number }
    await tx.query('UPDATE networks SET deleted_at = now() WHERE id = $1', [id])
    return 'deleted'
  })
}

/** What the host of each interface does with its network (its segment's VNI, its way out), by interface ID; an interface with no row is not in the map. */
export async function segmentsOfInterfaces (db: Pool, interfaceIds: readonly string[]): Promise<Map<string, { vni: number, outbound: NetworkOutbound }>> {
  if (interfaceIds.length === 0) return new Map()
  const { rows } = await db.query(
    'SELECT i.id, w.vni, w.outbound FROM interfaces i JOIN networks w ON w.id = i.network_id WHERE i.id = ANY($1::uuid[])',
    [interfaceIds]
  )
  return new Map(rows.map((row) => [row.id as string, { vni: row.vni as number, outbound: row.outbound as NetworkOutbound }]))
}
