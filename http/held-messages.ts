/**
 * A WebSocket route's input, listened to at once. @fastify/websocket hands a message that arrives
 * before a listener is attached to no one, and a client may send as soon as its socket opens,
 * while the route is still awaiting its lookups (the console routes: the instance's VMM in
 * PostgreSQL, the agent's VMM record). So a route calls this before it awaits anything, and says
 * later where the messages go; those that came meanwhile follow in order.
 */
import type { WebSocket } from 'ws'

export type MessageSink = (data: Buffer) => void

export function holdMessages (socket: WebSocket): (sink: MessageSink) => void {
  const held: Buffer[] = []
  let deliver: MessageSink | null = null
  socket.on('message', (data: Buffer) => {
    if (deliver === null) held.push(data)
    else deliver(data)
  })
  return (sink) => {
    deliver = sink
    for (const data of held.splice(0)) sink(data)
  }
}
