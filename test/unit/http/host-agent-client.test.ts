/**
 * The host agent client's error classes (docs/design.md §5), one test per class, against a local HTTP
 * server standing in for an agent: refusals are `InvalidRequest`, an agent affirming it has no
 * such VMM is `VmmNotFound`, something at the agent's URL that does not take the control plane's
 * calls (another token, a 404 that is not the agent's answer) is `AgentMisconfigured`, and
 * everything that leaves the truth unknown is `HostUnreachable`. Only the first two end retries.
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { HostAgentClient } from '../../../http/host-agent-client.js'
import { HostAgentError, NON_RETRYABLE_ERROR_CLASSES, type ErrorClass } from '../../../domain/errors.js'

const VMM = '00000000-0000-4000-8000-000000000001'

describe('host agent client error classes', () => {
  let server: Server
  let url: string
  /** What the stand-in agent does with the next request. */
  let behave: (respond: (status: number, body: string) => void, destroy: () => void) => void
  // A timeout long enough for an answer on a loaded machine (run 55's first call, 300 ms then,
  // timed out after 346 ms in the fast layer, and its 409 read as HostUnreachable); the timeout's
  // own test has a client of its own.
  const client = new HostAgentClient({ token: 'token-0123456789abcdef', timeoutMs: 10_000 })
  const hastyClient = new HostAgentClient({ token: 'token-0123456789abcdef', timeoutMs: 300 })

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
  /** Whether the activities' retry policies retry a failure of this class (workflows/activity-proxies.ts). */
  const retried = (errorClass: string) => !(NON_RETRYABLE_ERROR_CLASSES as string[]).includes(errorClass)

  it('a refusal (400, 409) is InvalidRequest, with the agent’s message', async () => {
    behave = (respond) => { respond(409, json({ error: 'Conflict', message: 'VMM belongs to another instance' })) }
    const err = await client.getVmm(url, VMM).catch((e: HostAgentError) => e)
    assert.ok(err instanceof HostAgentError)
    assert.equal(err.errorClass, 'InvalidRequest')
    assert.match(err.message, /409 VMM belongs to another instance/)
    behave = (respond) => { respond(400, json({ error: 'Bad Request', message: 'bad' })) }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'InvalidRequest')
  })

  it('the agent’s own 404 for a VMM is VmmNotFound, and a destroy of it answers null (already gone)', async () => {
    behave = (respond) => { respond(404, json({ error: 'VmmNotFound', message: 'no VMM' })) }
    assert.equal(await classOf(() => client.getVmm(url, VMM)), 'VmmNotFound')
    assert.equal(await client.destroyVmm(url, VMM), null)
    assert.equal(await client.findVmm(url, VMM), null)
  })

  it('the agent’s own 404 for a stray is an answer: the process is not (or no longer) one', async () => {
    behave = (respond) => { respond(404, json({ error: 'StrayNotFound', message: 'no stray VMM process 5' })) }
    assert.equal(await client.reapStray(url, { pid: 5, startTime: '7' }), false)
  })

  it('any other 404 (no such route: another program, another version, a proxy) is AgentMisconfigured, retried, never a VMM gone', async () => {
    const notTheAgents = [
      json({ message: 'Route GET:/v1/vmms/x not found', error: 'Not Found', statusCode: 404 }),
      json({ error: 'Not Found', message: `no route GET /v1/vmms/${VMM}` }),
      '<html><body>404 Not Found</body></html>',
      ''
    ]
    for (const body of notTheAgents) {
      behave = (respond) => { respond(404, body) }
      const errorClass = await classOf(() => client.getVmm(url, VMM))
      assert.equal(errorClass, 'AgentMisconfigured', body)
      assert.ok(retried(errorClass))
      await assert.rejects(client.destroyVmm(url, VMM), { errorClass: 'AgentMisconfigured' }, body)
      await assert.rejects(client.findVmm(url, VMM), { errorClass: 'AgentMisconfigured' }, body)
      await assert.rejects(client.reapStray(url, { pid: 5, startTime: '7' }), { errorClass: 'AgentMisconfigured' }, body)
    }
  })

  it('401 and 403 (the agent and the control plane hold different tokens) are AgentMisconfigured, retried, naming the agent and not the token', async () => {
    for (const status of [401, 403]) {
      behave = (respond) => { respond(status, json({ error: 'Unauthorized', message: 'a valid bearer token is required' })) }
      const err = await client.getVmm(url, VMM).catch((e: unknown) => e)
      assert.ok(err instanceof HostAgentError, String(err))
      assert.equal(err.errorClass, 'AgentMisconfigured', String(status))
      assert.ok(retried(err.errorClass))
      assert.match(err.message, new RegExp(`${url}/v1/vmms/${VMM}: ${status} .*authentication failed`))
      assert.doesNotMatch(err.message, /token-0123456789abcdef/)
    }
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
    assert.equal(await classOf(() => hastyClient.getVmm(url, VMM)), 'HostUnreachable')
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
