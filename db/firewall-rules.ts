/**
 * Firewall rules (docs/design.md §19): what each project allows into and out of its instances
 * beyond their own network's traffic, and what each instance's hosts are told of it.
 *
 * Every change takes the next generation of `firewall_generation` in its own transaction; a
 * reader takes the rules and the generation in one snapshot (`policiesOf`), so the generation an
 * agent is sent names exactly the rules it was resolved from, and the agent keeps the newest.
 */
import type { FirewallDirection, FirewallProtocol } from '../domain/firewall.js'
import type { Allowance, VmmPolicy } from '../domain/host-agent-api.js'
import { UUID_PATTERN } from '../domain/ids.js'
import { LIMITS } from '../domain/limits.js'
import { findNetworkId } from './networks.js'
import { inTransaction, type Pool, type Queryable } from './pool.js'

/** Names a network or an instance of the project, as a rule's target or peer. */
export type RuleRef = { network: string } | { instance: string }

export interface NewFirewallRule {
  id: string
  projectId: string
  target: RuleRef
  direction: FirewallDirection
  protocol: FirewallProtocol
  ports: { from: number, to: number } | null
  peer: RuleRef | { cidr: string }
  description: string
}

export interface FirewallRule {
  id: string
  target: { network: { id: string, name: string } } | { instance: { id: string, name: string } }
  direction: FirewallDirection
  protocol: FirewallProtocol
  ports: { from: number, to: number } | null
  peer: { cidr: string } | { network: { id: string, name: string } } | { instance: { id: string, name: string } }
  description: string
  createdAt: string
}

const RULE_COLUMNS = `r.id, r.direction, r.protocol, r.port_from, r.port_to, r.peer_cidr::text AS peer_cidr, r.description, r.created_at,
  r.network_id, tn.name AS network_name, r.instance_id, ti.name AS instance_name,
  r.peer_network_id, pn.name AS peer_network_name, r.peer_instance_id, pi.name AS peer_instance_name`
const RULE_JOINS = `LEFT JOIN networks tn ON tn.id = r.network_id LEFT JOIN instances ti ON ti.id = r.instance_id
  LEFT JOIN networks pn ON pn.id = r.peer_network_id LEFT JOIN instances pi ON pi.id = r.peer_instance_id`

function toRule (row: Record<string, any>): FirewallRule {
  return {
    id: row.id,
    target: row.network_id !== null ? { network: { id: row.network_id, name: row.network_name } } : { instance: { id: row.instance_id, name: row.instance_name } },
    direction: row.direction,
    protocol: row.protocol,
    ports: row.port_from === null ? null : { from: row.port_from, to: row.port_to },
    peer: row.peer_cidr !== null
      ? { cidr: row.peer_cidr }
      : row.peer_network_id !== null
        ? { network: { id: row.peer_network_id, name: row.peer_network_name } }
        : { instance: { id: row.peer_instance_id, name: row.peer_instance_name } },
    description: row.description,
    createdAt: row.created_at
  }
}

/** The next generation, taken in `tx`: the change's own, which serialises changes. */
async function nextGeneration (tx: Queryable): Promise<number> {
  const { rows } = await tx.query('UPDATE firewall_generation SET generation = generation + 1 RETURNING generation')
  return Number(rows[0].generation)
}

/** A live network or instance of the project, by name or ID; null when there is none. */
async function resolveRef (tx: Queryable, projectId: string, ref: RuleRef): Promise<{ column: 'network' | 'instance', id: string } | null> {
  const [column, id] = 'network' in ref
    ? ['network', await findNetworkId(tx, projectId, ref.network)] as const
    : ['instance', await findLiveInstanceId(tx, projectId, ref.instance)] as const
  return id === null ? null : { column, id }
}

/** A live instance of the project, by ID or by name. */
async function findLiveInstanceId (tx: Queryable, projectId: string, idOrName: string): Promise<string | null> {
  const { rows } = await tx.query(
    `SELECT id FROM instances WHERE project_id = $1 AND destroyed_at IS NULL AND ${UUID_PATTERN.test(idOrName) ? 'id = $2::uuid' : 'name = $2'}`,
    [projectId, idOrName]
  )
  return rows.length === 0 ? null : rows[0].id
}

export type RuleInsertProblem = { kind: 'target-missing' } | { kind: 'peer-missing' } | { kind: 'target-full' }

/**
 * Inserts the rule (once per ID) and takes the next generation; or says which reference names
 * nothing live, or that the target has as many rules as it may (`LIMITS.firewallRulesPerTarget`).
 */
export async function insertRule (db: Pool, rule: NewFirewallRule): Promise<{ rule: FirewallRule, generation: number } | RuleInsertProblem> {
  const outcome = await inTransaction(db, async (tx): Promise<{ generation: number } | RuleInsertProblem> => {
    const target = await resolveRef(tx, rule.projectId, rule.target)
    if (target === null) return { kind: 'target-missing' }
    const peer = 'cidr' in rule.peer ? null : await resolveRef(tx, rule.projectId, rule.peer)
    if (!('cidr' in rule.peer) && peer === null) return { kind: 'peer-missing' }
    // Changes one at a time from here (the generation's row lock), so the count holds until the commit.
    await tx.query('SELECT generation FROM firewall_generation FOR UPDATE')
    const others = await tx.query(
      'SELECT count(*)::int AS n FROM firewall_rules WHERE (network_id = $1 OR instance_id = $1) AND id <> $2',
      [target.id, rule.id]
    )
    if (others.rows[0].n >= LIMITS.firewallRulesPerTarget) return { kind: 'target-full' }
    const inserted = await tx.query(
      `INSERT INTO firewall_rules (id, project_id, network_id, instance_id, direction, protocol, port_from, port_to, peer_cidr, peer_network_id, peer_instance_id, description)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING`,
      [rule.id, rule.projectId, target.column === 'network' ? target.id : null, target.column === 'instance' ? target.id : null,
        rule.direction, rule.protocol, rule.ports?.from ?? null, rule.ports?.to ?? null, 'cidr' in rule.peer ? rule.peer.cidr : null,
        peer?.column === 'network' ? peer.id : null, peer?.column === 'instance' ? peer.id : null, rule.description]
    )
    return { generation: inserted.rowCount === 1 ? await nextGeneration(tx) : await currentGeneration(tx) }
  })
  if ('kind' in outcome) return outcome
  return { rule: (await findRule(db, rule.projectId, rule.id))!, generation: outcome.generation }
}

export async function listRules (db: Queryable, projectId: string): Promise<FirewallRule[]> {
  const { rows } = await db.query(`SELECT ${RULE_COLUMNS} FROM firewall_rules r ${RULE_JOINS} WHERE r.project_id = $1 ORDER BY r.created_at, r.id`, [projectId])
  return rows.map(toRule)
}

export async function findRule (db: Queryable, projectId: string, id: string): Promise<FirewallRule | null> {
  const { rows } = await db.query(`SELECT ${RULE_COLUMNS} FROM firewall_rules r ${RULE_JOINS} WHERE r.project_id = $1 AND r.id = $2`, [projectId, id])
  return rows.length === 0 ? null : toRule(rows[0])
}

/** Deletes the rule and takes the next generation; null when the project has no such rule. */
export async function deleteRule (db: Pool, projectId: string, id: string): Promise<{ generation: number } | null> {
  return await inTransaction(db, async (tx) => {
    const deleted = await tx.query('DELETE FROM firewall_rules WHERE project_id = $1 AND id = $2', [projectId, id])
    return deleted.rowCount === 0 ? null : { generation: await nextGeneration(tx) }
  })
}

async function currentGeneration (db: Queryable): Promise<number> {
  const { rows } = await db.query('SELECT generation FROM firewall_generation')
  return Number(rows[0].generation)
}

/**
 * What the hosts of each instance are told of the rules (`VmmPolicy`), read in one statement so
 * that the generation names exactly the rules it was resolved from:
 *
 * - `ingress` and `egress`: each rule that applies to the instance (naming it, or one of its
 *   networks), by direction, with its peer resolved to ranges: the peer's range, the peer
 *   network's, the peer instance's addresses; `egress` is null when no egress rule applies (the
 *   instance may send anywhere), and a list, empty or not, when one does, even one whose peer
 *   has no address now;
 * - `routes`: the networks a rule links to one of the instance's (either way: a rule into one
 *   naming the other, or the other's instance, as its peer), whose segment its hosts join so that
 *   they route between the two.
 */
export async function policiesOf (db: Queryable, instanceIds: readonly string[]): Promise<Map<string, VmmPolicy>> {
  const { rows } = await db.query(
    `WITH nets AS (
       SELECT DISTINCT i.instance_id, i.network_id FROM interfaces i WHERE i.instance_id = ANY($1::uuid[]) AND i.released_at IS NULL
     ), applying AS (
       SELECT n.instance_id, r.id, r.direction, r.protocol, r.port_from, r.port_to, r.peer_cidr, r.peer_network_id, r.peer_instance_id
         FROM nets n JOIN firewall_rules r ON r.network_id = n.network_id
       UNION
       SELECT r.instance_id, r.id, r.direction, r.protocol, r.port_from, r.port_to, r.peer_cidr, r.peer_network_id, r.peer_instance_id
         FROM firewall_rules r WHERE r.instance_id = ANY($1::uuid[])
     ), peers AS (
       SELECT a.instance_id, a.id, a.direction, a.protocol, a.port_from, a.port_to, COALESCE(a.peer_cidr, pn.cidr) AS peer
         FROM applying a LEFT JOIN networks pn ON pn.id = a.peer_network_id AND pn.deleted_at IS NULL
        WHERE a.peer_instance_id IS NULL
       UNION ALL
       SELECT a.instance_id, a.id, a.direction, a.protocol, a.port_from, a.port_to, set_masklen(pi.ip, 32)::cidr
         FROM applying a JOIN interfaces pi ON pi.instance_id = a.peer_instance_id AND pi.released_at IS NULL
     ), rule_nets AS (
       SELECT COALESCE(r.network_id, ti.network_id) AS target_net, COALESCE(r.peer_network_id, pi.network_id) AS peer_net
         FROM firewall_rules r
         LEFT JOIN interfaces ti ON ti.instance_id = r.instance_id AND ti.released_at IS NULL
         LEFT JOIN interfaces pi ON pi.instance_id = r.peer_instance_id AND pi.released_at IS NULL
     ), links AS (
       SELECT target_net AS a, peer_net AS b FROM rule_nets WHERE target_net IS NOT NULL AND peer_net IS NOT NULL
       UNION
       SELECT peer_net, target_net FROM rule_nets WHERE target_net IS NOT NULL AND peer_net IS NOT NULL
     ), routes AS (
       SELECT DISTINCT n.instance_id, w.vni, host(w.gateway) || '/' || masklen(w.cidr) AS gateway
         FROM nets n JOIN links l ON l.a = n.network_id JOIN networks w ON w.id = l.b AND w.deleted_at IS NULL
        WHERE NOT EXISTS (SELECT 1 FROM nets m WHERE m.instance_id = n.instance_id AND m.network_id = l.b)
     )
     SELECT direction AS kind, instance_id, id::text AS rule_id, protocol, port_from, port_to, peer::text AS peer, NULL::int AS vni, NULL AS gateway, NULL::bigint AS generation
       FROM peers WHERE peer IS NOT NULL
     UNION ALL
     SELECT DISTINCT 'egress-applies', instance_id, NULL::text, NULL::text, NULL::int, NULL::int, NULL::text, NULL::int, NULL::text, NULL::bigint FROM applying WHERE direction = 'egress'
     UNION ALL
     SELECT 'route', instance_id, NULL, NULL, NULL, NULL, NULL, vni, gateway, NULL FROM routes
     UNION ALL
     SELECT 'generation', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, generation FROM firewall_generation`,
    [instanceIds]
  )
  const generation = Number(rows.find((row) => row.kind === 'generation')!.generation)
  const policies = new Map<string, VmmPolicy>(instanceIds.map((id) => [id, { generation, ingress: [], egress: null, routes: [] }]))
  const byRule = new Map<string, Allowance>()
  for (const row of rows) {
    const policy = policies.get(row.instance_id)
    if (policy === undefined) continue
    if (row.kind === 'route') {
      policy.routes.push({ vni: row.vni, gateway: row.gateway })
      continue
    }
    // Egress is restricted once an egress rule applies, whether or not its peer has an address.
    if (row.kind === 'egress-applies') {
      policy.egress ??= []
      continue
    }
    const key = `${row.instance_id as string} ${row.rule_id as string}`
    let allowance = byRule.get(key)
    if (allowance === undefined) {
      allowance = { protocol: row.protocol, ...(row.port_from === null ? {} : { ports: { from: row.port_from, to: row.port_to } }), peers: [] }
      byRule.set(key, allowance)
      if (row.kind === 'egress') (policy.egress ??= []).push(allowance)
      else policy.ingress.push(allowance)
    }
    allowance.peers.push(row.peer)
  }
  for (const policy of policies.values()) {
    policy.routes.sort((a, b) => a.vni - b.vni)
    for (const allowance of [...policy.ingress, ...policy.egress ?? []]) allowance.peers.sort()
    // In one order whatever order the rows came in, so the same rules make the same ruleset.
    const byText = (a: Allowance, b: Allowance): number => JSON.stringify(a).localeCompare(JSON.stringify(b))
    policy.ingress.sort(byText)
    policy.egress?.sort(byText)
  }
  return policies
}

/** The live instances a change of this rule concerns: those it allows into, and those of the networks it links to theirs. */
export async function instancesConcerned (db: Queryable, rule: FirewallRule): Promise<string[]> {
  const targetNet = 'network' in rule.target ? rule.target.network.id : null
  const targetInstance = 'instance' in rule.target ? rule.target.instance.id : null
  const peerNet = 'network' in rule.peer ? rule.peer.network.id : null
  const peerInstance = 'instance' in rule.peer ? rule.peer.instance.id : null
  const { rows } = await db.query(
    `WITH linked AS (
       SELECT $1::uuid AS network_id WHERE $1::uuid IS NOT NULL
       UNION SELECT network_id FROM interfaces WHERE instance_id = $2::uuid AND released_at IS NULL
       UNION SELECT $3::uuid WHERE $3::uuid IS NOT NULL
       UNION SELECT network_id FROM interfaces WHERE instance_id = $4::uuid AND released_at IS NULL
     )
     SELECT DISTINCT i.instance_id FROM interfaces i JOIN instances x ON x.id = i.instance_id
      WHERE i.released_at IS NULL AND x.destroyed_at IS NULL AND i.network_id IN (SELECT network_id FROM linked)`,
    [targetNet, targetInstance, peerNet, peerInstance]
  )
  return rows.map((row) => row.instance_id as string)
}
