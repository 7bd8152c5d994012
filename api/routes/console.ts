/**
 * `/v1/projects/{project}/instances/:id/console` (and the unscoped `/v1/instances/:id/console`,
 * the `default` project's): an instance's serial console, relayed API → host agent → VMM.
 *
 * - `GET …/console/log?bytes=` is the end of the serial log of the instance's VMM (its active one,
 *   or its latest: a stopped instance's last boot, while its agent keeps the VMM's record).
 * - `GET …/console` upgraded to a WebSocket is the interactive console of its running VMM, for a
 *   token that may change the project's resources (a viewer may not type into a guest): bytes both ways, to the agent's WebSocket for that VMM
 *   (host-agent/http/console-routes.ts), which holds the one connection Cloud Hypervisor's
 *   serial socket allows. Either side closing closes the other; a refusal closes the WebSocket
 *   with 4000 + the HTTP status it stands for (4403, 4404, 4409, 4503) and the reason.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { WebSocket } from 'ws'
import { z } from 'zod'
import { consoleVmmOf } from '../../db/vmms.js'
import { HostAgentError } from '../../domain/errors.js'
import { holdMessages, type MessageSink } from '../../http/held-messages.js'
import { urlInteger } from '../../domain/url-integer.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { problemContent } from '../plugins/route-contract.js'
import { idParamsSchema } from '../schemas/common.js'
import { paramsIn, type RouteScope } from '../schemas/projects.js'
import { instanceOfTheProject } from '../services/project-scope.js'
import { decide, rolesWith } from '../../domain/access-policy.js'

const tags = ['instances']

interface ConsoleTarget {
  vmmId: string
  state: string
  agentUrl: string
}

const consoleLogQuery = z.strictObject({
  bytes: urlInteger(1, 1024 * 1024).default(64 * 1024).describe('how much of the end of the log, at most 1 MiB')
})

const routes: FastifyPluginAsyncZod<RouteScope> = async (fastify, scope) => {
  const withId = paramsIn(scope, idParamsSchema)
  fastify.addHook('preHandler', instanceOfTheProject(fastify.db))
  async function target (instanceId: string): Promise<ConsoleTarget> {
    const { instanceExists, vmm } = await consoleVmmOf(fastify.db, instanceId)
    if (!instanceExists) throw new ApiProblem(404, 'Not Found', `instance ${instanceId} does not exist`)
    if (vmm === null) throw new ApiProblem(404, 'Not Found', `instance ${instanceId} has never had a VMM, so it has no console`)
    return { vmmId: vmm.id, state: vmm.state, agentUrl: vmm.agentUrl }
  }

  function agents (): NonNullable<typeof fastify.hostAgents> {
    if (fastify.hostAgents === null) throw new ApiProblem(503, 'Service Unavailable', 'the API has no token for the host agents (VMPLANE_AGENT_TOKEN), so it cannot reach consoles')
    return fastify.hostAgents
  }

  fastify.get('/instances/:id/console/log', {
    config: { action: 'project.read' },
    schema: {
      tags,
      summary: "The end of the serial log of the instance's VMM (its active one, or its last)",
      params: withId,
      querystring: consoleLogQuery,
      produces: ['text/plain'],
      response: { 200: z.string().describe('what the guest printed, as text') }
    }
  }, async (request, reply) => {
    const { client } = agents()
    const vmm = await target(request.params.id)
    try {
      const log = await client.consoleLog(vmm.agentUrl, vmm.vmmId, request.query.bytes)
      return await reply.type('text/plain; charset=utf-8').send(log)
    } catch (err) {
      if (err instanceof HostAgentError && err.errorClass === 'VmmNotFound') {
        throw new ApiProblem(404, 'Not Found', `the host no longer keeps VMM ${vmm.vmmId}, nor its log`)
      }
      if (err instanceof HostAgentError) throw new ApiProblem(503, 'Service Unavailable', `the VMM's host cannot be reached now: ${err.message}`)
      throw err
    }
  })

  fastify.route({
    method: 'GET',
    url: '/instances/:id/console',
    // Read to connect; typing needs the project's write (checked in the handler, as a close code).
    config: { action: 'project.read' },
    schema: {
      tags,
      summary: "The interactive serial console of the instance's running VMM, as a WebSocket (a token that may change the project's resources): what the guest prints, and what is sent goes to it",
      params: withId,
      response: { 426: problemContent }
    },
    handler: async () => { throw new ApiProblem(426, 'Upgrade Required', 'the console is a WebSocket: connect with an Upgrade: websocket request') },
    wsHandler: async (socket: WebSocket, request) => {
      const { id } = request.params as { id: string }
      const input = holdMessages(socket)
      try {
        if (decide(request.principal, 'project.write', request.project!.id) !== 'allow') {
          throw new ApiProblem(403, 'Forbidden', `the interactive console needs a token of role ${rolesWith('project.write').join(', ')}`)
        }
        const { token } = agents()
        const vmm = await target(id)
        if (vmm.state !== 'running' && vmm.state !== 'rebooting' && vmm.state !== 'stopping') {
          throw new ApiProblem(409, 'Conflict', `instance ${id} has no running VMM (its last is ${vmm.state})`)
        }
        relay(socket, input, new WebSocket(`${vmm.agentUrl.replace(/^http/, 'ws')}/v1/vmms/${vmm.vmmId}/console`, { headers: { authorization: `Bearer ${token}` } }))
      } catch (err) {
        const status = err instanceof ApiProblem ? err.status : 500
        socket.close(4000 + status, (err instanceof ApiProblem ? err.detail : 'internal error; see the API log').slice(0, 120))
        if (!(err instanceof ApiProblem)) request.log.error({ err }, 'console relay failed')
      }
    }
  })
}

/** Bytes both ways between the client and the agent; what the client sent before the agent's socket opened is held until then. */
function relay (client: WebSocket, input: (sink: MessageSink) => void, agent: WebSocket): void {
  agent.on('open', () => { input((data) => { agent.send(data) }) })
  agent.on('message', (data: Buffer) => { client.send(data) })
  agent.on('close', (code, reason) => { client.close(code >= 4000 ? code : 1000, reason.toString()) })
  agent.on('unexpected-response', (_request, response) => { client.close(4000 + (response.statusCode ?? 502), 'the host agent refused the console') })
  agent.on('error', () => { client.close(4503, 'the host agent cannot be reached') })
  client.on('close', () => { agent.terminate() })
}

export default routes
