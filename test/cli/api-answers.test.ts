/**
 * The CLI's reading of answers no healthy stack gives on demand, from a stand-in API on
 * 127.0.0.1: refusals (403, 429 with Retry-After) as one line and exit 1, 5xx as exit 3 after
 * retries that reuse one Idempotency-Key, an answer that is not JSON, a `--wait` that rides out a
 * rate-limited poll, and a list of URLs whose first ones cannot answer.
 */
import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, beforeEach, describe, it } from 'node:test'
import { freePorts } from '../helpers/stack.js'
import { assertOneLineError, runCli } from '../helpers/cli.js'

const INSTANCE_ID = '11111111-1111-4111-8111-111111111111'
const OPERATION_ID = '22222222-2222-4222-8222-222222222222'

interface Seen {
  method: string
  url: string
  headers: IncomingMessage['headers']
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void

function problem (response: ServerResponse, status: number, detail: string, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/problem+json', ...headers })
  response.end(JSON.stringify({ type: 'about:blank', title: 'x', status, detail }))
}

function sendJson (response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

function instance (state: string, operation: unknown) {
  return {
    id: INSTANCE_ID,
    name: 'web-1',
    state,
    intendedState: 'running',
    vcpus: 1,
    memoryMiB: 256,
    boot: { kernel: 'vmlinux' },
    disks: [],
    interfaces: [],
    cloudInit: null,
    stopGraceSeconds: 30,
    restartPolicy: 'never',
    vmm: null,
    operation,
    lastError: null,
    conditions: [],
    createdAt: '2026-11-22T09:00:00.000Z',
    updatedAt: '2026-11-22T09:00:01.000Z',
    destroyedAt: null
  }
}

function operation (status: string) {
  return {
    id: OPERATION_ID,
    kind: 'start',
    instanceId: INSTANCE_ID,
    status,
    error: null,
    startedAt: '2026-11-22T09:00:00.000Z',
    finishedAt: status === 'running' ? null : '2026-11-22T09:00:02.000Z',
    workflowId: `instance-${INSTANCE_ID}`,
    runId: null
  }
}

describe('vmplane CLI, answers from the API', () => {
  let server: Server
  let url: string
  let seen: Seen[]
  let handler: Handler

  before(async () => {
    server = createServer((request, response) => {
      seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers })
      request.resume().once('end', () => handler(request, response))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => { await new Promise((resolve) => server.close(resolve)) })
  beforeEach(() => { seen = [] })

  const cli = async (...args: string[]) => await runCli(['--url', url, '--token', 'secret', ...args])

  it('a 403 is exit 1 with the API\'s detail, and the token went as a bearer token', async () => {
    handler = (_request, response) => problem(response, 403, 'this token may only read')
    assertOneLineError(await cli('instances', 'start', INSTANCE_ID), 1, /^vmplane: this token may only read \(HTTP 403\)$/)
    assert.equal(seen[0]?.headers.authorization, 'Bearer secret')
  })

  it('a 429 is exit 1 saying when to retry, from Retry-After', async () => {
    handler = (_request, response) => problem(response, 429, 'rate limit exceeded', { 'retry-after': '7' })
    assertOneLineError(await cli('hosts', 'list'), 1, /^vmplane: rate limit exceeded; retry in 7 s \(HTTP 429\)$/)
    assert.equal(seen.length, 1, 'a refusal is not retried')
  })

  it('a 503 is retried with the same Idempotency-Key, then exit 3; the next invocation has a key of its own', async () => {
    handler = (_request, response) => problem(response, 503, 'Temporal is not reachable')
    assertOneLineError(await cli('instances', 'stop', INSTANCE_ID), 3, /^vmplane: Temporal is not reachable \(HTTP 503\)$/)
    assert.equal(seen.length, 3, 'tried three times')
    const keys = new Set(seen.map((request) => request.headers['idempotency-key']))
    assert.equal(keys.size, 1, 'one key for every attempt')
    const [key] = keys
    assert.match(String(key), /^vmplane-cli-[0-9a-f-]{36}$/)

    seen = []
    await cli('instances', 'stop', INSTANCE_ID)
    assert.notEqual(seen[0]?.headers['idempotency-key'], key)
  })

  it('a 409 with Retry-After (its key still in progress, on a replica that died, say) is asked again as it says until answered', async () => {
    handler = (_request, response) => {
      if (seen.length <= 3) return problem(response, 409, 'a request with Idempotency-Key k is still in progress', { 'retry-after': '1' })
      sendJson(response, 202, { instance: instance('stopping', operation('running')), operation: operation('running') })
    }
    const result = await cli('instances', 'stop', INSTANCE_ID)
    assert.equal(result.code, 0, result.stderr)
    assert.equal(seen.length, 4)
    assert.equal(new Set(seen.map((request) => request.headers['idempotency-key'])).size, 1, 'one key for every attempt')
  })

  it('an answer that is not JSON is exit 3, suspecting the URL', async () => {
    handler = (_request, response) => { response.writeHead(200, { 'content-type': 'text/html' }); response.end('<html>hello</html>') }
    assertOneLineError(await cli('hosts', 'list'), 3, /the API answered 200 with something that is not JSON; is http:\/\/127\.0\.0\.1:\d+ a vmplane API\?/)
  })

  it('--wait rides out a rate-limited poll and ends with the operation', async () => {
    let polls = 0
    handler = (request, response) => {
      if (request.method === 'POST') return sendJson(response, 202, { instance: instance('stopped', operation('running')), operation: operation('running') })
      if (request.url === `/v1/projects/default/operations/${OPERATION_ID}`) {
        polls++
        if (polls === 1) return problem(response, 429, 'rate limit exceeded', { 'retry-after': '1' })
        return sendJson(response, 200, operation(polls < 3 ? 'running' : 'succeeded'))
      }
      sendJson(response, 200, instance(polls < 3 ? 'starting' : 'running', null))
    }
    const result = await cli('instances', 'start', INSTANCE_ID, '--wait')
    assert.equal(result.code, 0, result.stderr)
    assert.deepEqual(result.stderr.split('\n').filter((line) => line !== '').map((line) => line.replace(/\(\d+\.\d s\)/, '(T)')), [
      'web-1: stopped (T)',
      'web-1: stopped → starting (T)',
      'web-1: starting → running (T)'
    ])
    assert.match(result.stdout, /^state: +running \(intended: running\)$/m)
  })

  it('given a list of URLs, passes over one nobody listens at and one answering 503, and asks the one that answered first from then on', async () => {
    const unavailable: Seen[] = []
    const replica = createServer((request, response) => {
      unavailable.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers })
      request.resume().once('end', () => problem(response, 503, 'Temporal is not reachable'))
    })
    await new Promise<void>((resolve) => replica.listen(0, '127.0.0.1', resolve))
    try {
      let polls = 0
      handler = (request, response) => {
        if (request.method === 'POST') return sendJson(response, 202, { instance: instance('stopped', operation('running')), operation: operation('running') })
        if (request.url === `/v1/projects/default/operations/${OPERATION_ID}`) return sendJson(response, 200, operation(++polls < 2 ? 'running' : 'succeeded'))
        sendJson(response, 200, instance(polls < 2 ? 'starting' : 'running', null))
      }
      const urls = [`http://127.0.0.1:${await freePorts(1)}`, `http://127.0.0.1:${(replica.address() as AddressInfo).port}`, url]
      const result = await runCli(['--url', urls.join(','), '--token', 'secret', 'instances', 'start', INSTANCE_ID, '--wait'])
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /^state: +running \(intended: running\)$/m)
      // The start went to the 503 first, then here, under one key; every poll came straight here.
      assert.deepEqual(unavailable.map((request) => request.method), ['POST'])
      assert.equal(seen[0]?.method, 'POST')
      assert.equal(seen[0]?.headers['idempotency-key'], unavailable[0]?.headers['idempotency-key'])
      assert.ok(seen.length >= 3, `${seen.length} requests here`)
    } finally {
      await new Promise((resolve) => replica.close(resolve))
    }
  })
})
