/**
 * The API's way to the host agents, for what only they have: a VMM's serial console and its
 * log. Everything else the API reads from PostgreSQL. Without the agents' token
 * (VMPLANE_AGENT_TOKEN) the console routes answer 503 saying so.
 */
import fp from 'fastify-plugin'
import { HostAgentClient } from '../../http/host-agent-client.js'

/** How long a console log may take to come from its agent. */
const AGENT_TIMEOUT_MS = 10_000

export interface HostAgents {
  client: HostAgentClient
  token: string
}

declare module 'fastify' {
  interface FastifyInstance {
    hostAgents: HostAgents | null
  }
}

export default fp<{ agentToken: string | null }>(async (fastify, opts) => {
  fastify.decorate('hostAgents', opts.agentToken === null
    ? null
    : { client: new HostAgentClient({ token: opts.agentToken, timeoutMs: AGENT_TIMEOUT_MS }), token: opts.agentToken })
}, { name: 'host-agents' })
