/**
 * What a refused request must leave as it was: the rows of PostgreSQL that say what exists and
 * what was asked (instances, operations, events, VMMs, reservations, idempotency keys), each host
 * agent's records of its VMMs, and the VMM processes themselves. Hosts' heartbeats and the
 * reconciler's passes change on their own, and are left out.
 */
import pg from 'pg'
import { HostAgentClient } from '../../../http/host-agent-client.js'
import { findVmmProcesses } from '../../../stack/processes.js'
import type { TestStack } from '../stack.js'

const TABLES = ['instances', 'operations', 'instance_events', 'vmms', 'reservations', 'idempotency_keys']

export interface StackState {
  /** Each table's rows, as text, in a fixed order. */
  rows: Record<string, string[]>
  /** Each agent's VMM records, by host. */
  agents: Record<string, unknown>
  vmmProcesses: number[]
}

export async function stateOf (stack: TestStack): Promise<StackState> {
  const db = new pg.Client({ connectionString: stack.info.databaseUrl })
  await db.connect()
  const rows: Record<string, string[]> = {}
  try {
    for (const table of TABLES) {
      const result = await db.query<{ row: string }>(`SELECT t::text AS row FROM ${table} t ORDER BY 1`)
      rows[table] = result.rows.map((r) => r.row)
    }
  } finally {
    await db.end()
  }
  const agents: Record<string, unknown> = {}
  for (const host of stack.info.hosts) agents[host.id] = await agentRecords(host.url, stack.info.agentToken)
  return { rows, agents, vmmProcesses: (await findVmmProcesses(stack.dataDir)).sort((a, b) => a - b) }
}

/** An agent's records of its VMMs, and the strays it sees. */
export async function agentRecords (agentUrl: string, token: string): Promise<unknown> {
  const agent = new HostAgentClient({ token, timeoutMs: 5000 })
  return { vmms: await agent.listVmms(agentUrl), strays: await agent.listStrays(agentUrl) }
}
