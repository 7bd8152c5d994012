/**
 * What a black-box run of hostile requests found on the API (issue 15), each case as it was
 * reported: a string PostgreSQL cannot store answered 500, an empty query value was read as 0,
 * the router's errors were not problem details. Every one must be a 4xx problem that names what
 * is wrong, and change nothing.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'
const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }

function validCreate (boot: Record<string, string>): Record<string, unknown> {
  return { name: 'hostile', vcpus: 1, memoryMiB: 256, start: false, boot: { kernel: 'vmlinux', ...boot } }
}

function assertProblem (response: LightMyRequestResponse, status: number, path: string): void {
  assert.equal(response.statusCode, status, response.body)
  assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
  const problem = response.json()
  assert.equal(problem.status, status)
  assert.match(problem.detail, new RegExp(path.replace(/[.[\]]/g, '\\$&')), `${problem.detail} names ${path}`)
}

describe('the API under hostile input', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  before(async () => { api = await startInProcessApi() })
  after(async () => { await api?.stop() })

  async function rowCounts (): Promise<Record<string, number>> {
    const { rows } = await api.database.pool.query<{ instances: number, operations: number, events: number }>(
      `SELECT (SELECT count(*)::int FROM instances) AS instances,
              (SELECT count(*)::int FROM operations) AS operations,
              (SELECT count(*)::int FROM instance_events) AS events`)
    return { ...rows[0]! }
  }

  it('refuses a NUL byte or a lone surrogate in a boot field with a 400 naming it, and stores nothing', async () => {
    const before = await rowCounts()
    for (const [field, value] of [['kernel', '\ud800'], ['kernel', 'vm\u0000linux'], ['initramfs', '\udfff'], ['initramfs', 'a\u0000'], ['cmdline', 'a\u0000b'], ['cmdline', 'console=\ud800']]) {
      const response = await api.server.inject({
        method: 'POST', url: '/v1/instances', headers: auth, payload: validCreate({ [field]: value })
      })
      assertProblem(response, 400, `body.boot.${field}`)
    }
    assert.deepEqual(await rowCounts(), before)
  })

  it('refuses control characters and non-ASCII in a kernel command line', async () => {
    for (const cmdline of ['console=ttyS0\nroot=/dev/vda', 'a\tb', 'quiet\u007f', 'café']) {
      const response = await api.server.inject({ method: 'POST', url: '/v1/instances', headers: auth, payload: validCreate({ cmdline }) })
      assertProblem(response, 400, 'body.boot.cmdline')
    }
  })

  it('reads an empty or non-numeric query value as a 400 naming it, never as 0', async () => {
    const cases: Array<[string, string, string]> = [
      ['DELETE', `/v1/instances/${UNKNOWN_ID}?graceSeconds=`, 'query.graceSeconds'],
      ['DELETE', `/v1/instances/${UNKNOWN_ID}?graceSeconds`, 'query.graceSeconds'],
      ['DELETE', `/v1/instances/${UNKNOWN_ID}?graceSeconds=+5`, 'query.graceSeconds'],
      ['DELETE', `/v1/instances/${UNKNOWN_ID}?graceSeconds=1e1`, 'query.graceSeconds'],
      ['GET', '/v1/instances?limit=', 'query.limit'],
      ['GET', `/v1/instances/${UNKNOWN_ID}/events?limit=abc`, 'query.limit'],
      ['GET', '/v1/admin/reconcile?limit=', 'query.limit']
    ]
    for (const action of ['start', 'stop', 'reboot']) {
      cases.push(['POST', `/v1/instances/${UNKNOWN_ID}/${action}?wait=`, 'query.wait'])
      cases.push(['POST', `/v1/instances/${UNKNOWN_ID}/${action}?wait`, 'query.wait'])
    }
    cases.push(['DELETE', `/v1/instances/${UNKNOWN_ID}?wait=`, 'query.wait'], ['DELETE', `/v1/instances/${UNKNOWN_ID}?wait`, 'query.wait'])
    for (const [method, url, path] of cases) {
      assertProblem(await api.server.inject({ method: method as 'GET', url, headers: auth }), 400, path)
    }
  })

  it('reads the bearer scheme in any case, as HTTP says, and refuses anything but a token after it', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
      const response = await api.server.inject({ method: 'GET', url: '/v1/hosts', headers: { authorization: `${scheme} ${OPERATOR_TOKEN}` } })
      assert.equal(response.statusCode, 200, `${scheme}: ${response.body}`)
    }
    for (const authorization of ['Bearer', 'Bearer ', `Bearer ${OPERATOR_TOKEN} extra`, `Basic ${OPERATOR_TOKEN}`, `Bearer${OPERATOR_TOKEN}`]) {
      assertProblem(await api.server.inject({ method: 'GET', url: '/v1/hosts', headers: { authorization } }), 401, 'token')
    }
  })

  it('refuses a query parameter a route does not read, and a body that is not JSON where it reads none', async () => {
    assertProblem(await api.server.inject({ method: 'GET', url: '/v1/hosts?bogus=1', headers: auth }), 400, 'query')
    assertProblem(await api.server.inject({ method: 'GET', url: '/healthz?verbose=1' }), 400, 'query')
    const start = await api.server.inject({
      method: 'POST', url: `/v1/instances/${UNKNOWN_ID}/start`, headers: { ...auth, 'content-type': 'text/plain' }, payload: 'please'
    })
    assertProblem(start, 415, 'Media Type')
  })

  it('answers a malformed URL and an over-long path parameter with problem details', async () => {
    assertProblem(await api.server.inject({ method: 'GET', url: '/v1/instances/%C0%AF', headers: auth }), 400, 'URL')
    assertProblem(await api.server.inject({ method: 'GET', url: `/v1/instances/${'a'.repeat(101)}`, headers: auth }), 414, 'parameter')
  })

  describe('its document', () => {
    let document: any
    before(async () => { document = (await api.server.inject({ method: 'GET', url: '/openapi.json' })).json() })

    it('says an instance\'s operation may be null, in a way OpenAPI reads', () => {
      assert.match(document.openapi, /^3\.1\./)
      const operation = document.components.schemas.Instance.properties.operation
      assert.ok(operation.anyOf?.some((option: { type?: string }) => option.type === 'null'), JSON.stringify(operation))
    })

    it('lists 413, 414, 415 and 429 where they can be answered, as problem details', () => {
      const stop = document.paths['/v1/instances/{id}/stop'].post
      for (const status of ['413', '414', '415', '429']) {
        assert.ok(stop.responses[status]?.content?.['application/problem+json'], `stop documents ${status}`)
      }
      const create = document.paths['/v1/instances'].post
      for (const status of ['413', '415', '429']) assert.ok(create.responses[status], `create documents ${status}`)
    })

    it('asks no token of the health checks, and the bearer token of /v1', () => {
      assert.deepEqual(document.paths['/healthz'].get.security, [])
      assert.deepEqual(document.paths['/readyz'].get.security, [])
      assert.deepEqual(document.paths['/v1/instances'].get.security, [{ bearer: [] }])
    })

    it('lets a stop be sent without a body, as the API accepts it', () => {
      assert.equal(document.paths['/v1/instances/{id}/stop'].post.requestBody.required, false)
    })
  })
})
