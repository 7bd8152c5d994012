/**
 * A VMM's serial console: the tail of its log, and the interactive console over WebSocket.
 *
 * The WebSocket relays bytes both ways between one client (the API's relay, api/routes/console.ts)
 * and the VMM's serial port, through the agent's connection to it (console/serial-console.ts):
 * what the guest prints goes to every client attached, what a client sends goes to the guest.
 * A plain GET on the WebSocket's path is answered 426.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import type { WebSocket } from 'ws'
import { consoleLogQuerySchema, vmmIdParamsSchema } from '../../domain/host-agent-api.js'
import { readTail, type SerialConsole } from '../console/serial-console.js'
import { AgentError, conflict } from '../errors.js'
import type { Supervisor } from '../supervisor/supervisor.js'
import { holdMessages, type MessageSink } from '../../http/held-messages.js'
import { errorContent } from '../../http/route-contract.js'
import { agentRouteContract } from './route-contract.js'

export const consoleRoutes: FastifyPluginAsyncZod<{ supervisor: Supervisor }> = async (app, { supervisor }) => {
  app.get('/v1/vmms/:id/console/log', {
    schema: {
      params: vmmIdParamsSchema,
      querystring: consoleLogQuerySchema,
      produces: ['text/plain'],
      response: { 200: z.string().describe('the end of what the guest printed') }
    }
  }, async (request, reply) => {
    const vmm = await supervisor.get(request.params.id)
    const tail = await readTail(vmm.paths.serialLog, request.query.bytes)
    return await reply.type('text/plain; charset=utf-8').send(tail.toString())
  })

  app.route({
    method: 'GET',
    url: '/v1/vmms/:id/console',
    schema: { params: vmmIdParamsSchema, response: { 426: errorContent(agentRouteContract) } },
    handler: async () => { throw new AgentError(426, 'this is a WebSocket: connect with an Upgrade: websocket request') },
    wsHandler: async (socket: WebSocket, request) => {
      const { id } = request.params as { id: string }
      const input = holdMessages(socket)
      try {
        const vmm = await supervisor.get(id)
        if (vmm.terminal) throw conflict(`VMM ${id} is ${vmm.record.state}; it has no console`)
        attach(socket, input, vmm.console)
      } catch (err) {
        socket.close(4000 + ((err as { status?: number }).status ?? 500), (err as Error).message.slice(0, 120))
      }
    }
  })
}

/** Relays between the WebSocket and the VMM's serial console until either side goes. */
function attach (socket: WebSocket, input: (sink: MessageSink) => void, serial: SerialConsole): void {
  const output = (chunk: Buffer): void => { socket.send(chunk) }
  serial.on('output', output)
  input((data) => { serial.write(data) })
  socket.on('close', () => { serial.off('output', output) })
}
