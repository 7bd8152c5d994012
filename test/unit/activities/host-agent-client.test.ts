/**
 * The host agent client's error classes (docs/design.md §5), one test per class, against a local HTTP
 * server standing in for an agent: refusals are `InvalidRequest`, an agent affirming it has no
 * such VMM is `VmmNotFound`, and everything that leaves the truth unknown is `HostUnreachable`.
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { HostAgentClient } from '../../../activities/host-agent-client.js'
import { HostAgentError, type ErrorClass } from '../../../domain/errors.js'

const VMM = '00000000-0000-4000-8000-000000000001'

describe('host agent client error classes', () => {
  let server: Server
  let url: string
  /** What the stand-in agent does with the next request. */
  let behave: (respond: (status: number, body: string) => void, destroy: () => void) => void
  const client = new HostAgentClient({ token: 'token-0123456789abcdef', timeoutMs: 300 })

  before(async () => {
    server = createServer((request, response) => {
      request.resume()
      behave(
        (status, body) => { response.writeHead(status, { 'content-type': 'application/json' }).end(body) },
        () => { request.socket.destroy() }
      )
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  async function classOf (call: () => Promise<unknown>): Promise<ErrorClass> {
    try {
      await call()
    } catch (err) {
      assert.ok(err instanceof HostAgentError, String(err))
      return err.errorClass
    }
    assert.fail('the call succeeded')
  }

  const json = (body: object) => JSON.stringify(body)

  it('a refusal (400, 409) is InvalidRequest, with the agent’s message', async () => {
    behave = (respond) => { respond(409, json({ error: 'Conflict', message: 'VMM belongs to another instance' })) }
    const err = await client.getVmm(url, VMM).catch((e: HostAgentError) => e)
    assert.ok(err instanceof HostAgentError)
    assert.equal(err.errorClass, 'InvalidRequest')
    assert.match(err.message, /409 VMM belongs to another instance/)
    behave = (respond) => { respond(400, json({ error: 'Bad Request', message: 'bad' })) }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'InvalidRequest')
  })

  it('404 for a VMM is VmmNotFound, and a destroy of it answers null (already gone)', async () => {
    behave = (respond) => { respond(404, json({ error: 'Not Found', message: 'no VMM' })) }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'VmmNotFound')
    assert.equal(await client.destroyVmm(url, VMM), null)
  })

  it('5xx and 503 are HostUnreachable: unknown, not dead', async () => {
    for (const status of [500, 502, 503]) {
      behave = (respond) => { respond(status, json({ error: 'Unavailable', message: 'try later' })) }
      assert.equal(await classOf(() => client.getVmm(url, VMM)), 'HostUnreachable', String(status))
    }
  })

  it('a timeout is HostUnreachable', async () => {
    behave = () => {}
    const started = Date.now()
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'HostUnreachable')
    assert.ok(Date.now() - started < 2000)
  })

  it('a connection reset mid-request is HostUnreachable', async () => {
    behave = (_respond, destroy) => { destroy() }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'HostUnreachable')
  })

  it('a refused connection is HostUnreachable', async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    assert.equal(await classOf(() => client.getVmm(`http://127.0.0.1:${port}`, VMM)), 'HostUnreachable')
  })

  it('an answer that is not what the agent’s API promises is HostUnreachable, not a fact', async () => {
    behave = (respond) => { respond(200, 'not json') }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'HostUnreachable')
    behave = (respond) => { respond(200, json({ id: VMM })) }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'HostUnreachable')
  })
})
