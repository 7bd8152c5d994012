/**
 * The API's console relay (api/routes/console.ts) with a host agent stand-in: what a client types
 * the moment its WebSocket opens reaches the agent, although the API looks up the instance's VMM
 * in PostgreSQL before it connects to the agent. (A client that typed at once lost its line when
 * that lookup was slow: CI's migration test, under load.)
 *
 * The API runs in process over a real PostgreSQL; the agent is a WebSocket server that records
 * what it receives.
 */
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import WebSocket, { WebSocketServer } from 'ws'
import { waitFor } from '../../stack/wait.js'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'

describe('the console relay', { timeout: 60_000 }, () => {
  let api: InProcessApi
  let agent: WebSocketServer
  let apiUrl: string
  const received: string[] = []
  const instance = randomUUID()
  const vmm = randomUUID()

  before(async () => {
    agent = new WebSocketServer({ host: '127.0.0.1', port: 0, path: `/v1/vmms/${vmm}/console` })
    agent.on('connection', (socket) => { socket.on('message', (data: Buffer) => { received.push(data.toString('utf8')) }) })
    await new Promise((resolve) => agent.once('listening', resolve))
    api = await startInProcessApi({ env: { VMPLANE_AGENT_TOKEN: 'agent-token-for-the-relay-test' } })
    const db = api.database.pool
    await db.query("INSERT INTO hosts (id, agent_url, vcpus, memory_mib, storage_gib) VALUES ('host-1', $1, 8, 8192, 100)", [`http://127.0.0.1:${(agent.address() as AddressInfo).port}`])
    await db.query(`INSERT INTO instances (id, project_id, name, vcpus, memory_mib, boot, stop_grace_seconds, state, intended_state)
      VALUES ($1, (SELECT id FROM projects WHERE name = 'default'), 'typist', 1, 256, '{"kernel": "vmlinux"}', 30, 'running', 'running')`, [instance])
    await db.query("INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, 'host-1', 'running')", [vmm, instance])
    await db.query('UPDATE instances SET active_vmm_id = $1 WHERE id = $2', [vmm, instance])
    apiUrl = await api.server.listen({ host: '127.0.0.1', port: 0 })
  })
  after(async () => {
    await api?.stop()
    agent?.close()
  })

  it('delivers what the client sends as soon as its socket opens', async () => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const line = `line ${attempt}\r`
      const client = new WebSocket(`${apiUrl.replace(/^http/, 'ws')}/v1/instances/${instance}/console`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })
      await new Promise((resolve, reject) => { client.once('open', resolve); client.once('error', reject) })
      client.send(Buffer.from(line))
      await waitFor(`the agent to receive ${JSON.stringify(line)}`, async () => received.includes(line) ? true : null, { timeoutMs: 5000, detail: () => JSON.stringify(received) })
      client.close()
    }
  })
})
