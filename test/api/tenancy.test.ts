/**
 * Tenancy in the fast layer (docs/design.md §18): two projects, a token of each role in each, the
 * fleet's tokens, an expired and a revoked one; every route of the API's document tried with every
 * token, against the other project's resources as well as its own.
 *
 * What a request reveals is read from its answer, and compared with what this file expects, which
 * is written here from the roles as documented, not from the policy table:
 * - 401: the token is refused (expired, revoked);
 * - 403: the token may see the project, and its role may not do this;
 * - 404 naming the project (or the resource) as not existing: hidden, as a missing one is;
 * - anything else: allowed. An allowed request is sent with an input its route refuses (a body or
 *   a query it does not take, an ID that is not one), so that it changes nothing: the route's
 *   validation runs only after the policy's decision.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { parseToken } from '../../api/auth/token-secrets.js'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

type Outcome = 'allowed' | 'forbidden' | 'hidden' | 'unauthorized'
type PersonRole = 'viewer' | 'collaborator' | 'admin' | 'fleet-viewer' | 'fleet-operator'

interface Token {
  name: string
  token: string
  role: PersonRole
  /** The project it is bound to; null for the fleet's. */
  project: string | null
  /** Refused at authentication: expired or revoked. */
  refused?: boolean
}

interface ProjectFixture {
  instanceId: string
  operationId: string
  network: string
  ruleId: string
  tokenId: string
}

const PROJECTS = ['alpha', 'beta'] as const
const READS = new Set(['GET', 'HEAD'])

/** The secret part of a person's token. */
function secretOf (token: string): string {
  return parseToken(token)!.secret
}

describe('tenancy: every route, every token', { timeout: 5 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()
  const tokens: Token[] = []
  const fixtures: Record<string, ProjectFixture> = {}

  async function send (method: string, url: string, token: string, payload?: unknown): Promise<LightMyRequestResponse> {
    return await api.server.inject({
      method: method as 'GET',
      url,
      headers: { authorization: `Bearer ${token}` },
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> })
    })
  }

  async function ok<T> (response: LightMyRequestResponse, status: number): Promise<T> {
    assert.equal(response.statusCode, status, response.body)
    return response.json() as T
  }

  before(async () => {
    api = await startInProcessApi({ temporal })
    await api.database.pool.query("INSERT INTO hosts (id, agent_url, vcpus, memory_mib, storage_gib) VALUES ('host-1', 'http://127.0.0.1:1', 8, 8192, 100)")
    for (const project of PROJECTS) {
      await ok(await send('POST', '/v1/projects', OPERATOR_TOKEN, { name: project }), 201)
      for (const role of ['viewer', 'collaborator', 'admin'] as const) {
        const made = await ok<{ token: string }>(await send('POST', `/v1/projects/${project}/tokens`, OPERATOR_TOKEN, { name: `${project}-${role}`, role }), 201)
        tokens.push({ name: `${project}-${role}`, token: made.token, role, project })
      }
      const network = `${project}-net`
      await ok(await send('POST', `/v1/projects/${project}/networks`, OPERATOR_TOKEN, { name: network, cidr: project === 'alpha' ? '10.61.0.0/24' : '10.62.0.0/24' }), 201)
      const created = await ok<{ instance: { id: string }, operation: { id: string } }>(await send('POST', `/v1/projects/${project}/instances`, OPERATOR_TOKEN, {
        name: `${project}-vm`, vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux' }, start: false, interfaces: [{ network }]
      }), 202)
      const rule = await ok<{ id: string }>(await send('POST', `/v1/projects/${project}/firewall-rules`, OPERATOR_TOKEN, {
        target: { network }, protocol: 'tcp', ports: { from: 22, to: 22 }, peer: { cidr: '192.168.0.0/16' }
      }), 201)
      const listed = await ok<{ items: Array<{ id: string }> }>(await send('GET', `/v1/projects/${project}/tokens`, OPERATOR_TOKEN), 200)
      fixtures[project] = { instanceId: created.instance.id, operationId: created.operation.id, network, ruleId: rule.id, tokenId: listed.items[0]!.id }
    }
    for (const role of ['fleet-viewer', 'fleet-operator'] as const) {
      const made = await ok<{ token: string }>(await send('POST', '/v1/tokens', OPERATOR_TOKEN, { name: role, role }), 201)
      tokens.push({ name: role, token: made.token, role, project: null })
    }
    // Expired: made for a day, then its day put in the past. Revoked: made, then revoked.
    const expiring = await ok<{ id: string, token: string }>(await send('POST', '/v1/projects/alpha/tokens', OPERATOR_TOKEN, { name: 'alpha-expired', role: 'admin', expiresInDays: 1 }), 201)
    await api.database.pool.query("UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE id = $1", [expiring.id])
    tokens.push({ name: 'alpha-expired', token: expiring.token, role: 'admin', project: 'alpha', refused: true })
    const revoked = await ok<{ id: string, token: string }>(await send('POST', '/v1/tokens', OPERATOR_TOKEN, { name: 'fleet-revoked', role: 'fleet-operator' }), 201)
    await ok(await send('DELETE', `/v1/tokens/${revoked.id}`, OPERATOR_TOKEN), 200)
    tokens.push({ name: 'fleet-revoked', token: revoked.token, role: 'fleet-operator', project: null, refused: true })
  })
  after(async () => { await api?.stop() })

  /** What this file expects of the token on the route, acting in `project` (null: a fleet route). */
  function expected (token: Token, method: string, route: string, project: string | null): Outcome {
    if (token.refused === true) return 'unauthorized'
    const read = READS.has(method)
    const fleetRole = token.project === null ? token.role : null
    const may = (projectRoles: PersonRole[], fleetRoles: PersonRole[]): Outcome =>
      (fleetRole !== null ? fleetRoles.includes(fleetRole) : projectRoles.includes(token.role)) ? 'allowed' : 'forbidden'
    if (route === '/v1/hosts/{id}/lease') return 'forbidden'
    if (route === '/v1/projects' && read) return 'allowed'
    if (route === '/v1/images') return 'allowed'
    const projectResource = project !== null && !(route === '/v1/projects/{project}' && !read) && !(route.endsWith('/quotas') && !read)
    if (!projectResource) return may([], read ? ['fleet-viewer', 'fleet-operator'] : ['fleet-operator'])
    if (token.project !== null && token.project !== project) return 'hidden'
    if (route.includes('/tokens')) return may(['admin'], ['fleet-operator'])
    if (route.endsWith('/audit')) return may(['admin'], ['fleet-viewer', 'fleet-operator'])
    return read ? may(['viewer', 'collaborator', 'admin'], ['fleet-viewer', 'fleet-operator']) : may(['collaborator', 'admin'], ['fleet-operator'])
  }

  function observed (response: LightMyRequestResponse): Outcome {
    if (response.statusCode === 401) return 'unauthorized'
    if (response.statusCode === 403) return 'forbidden'
    if (response.statusCode === 404 && /^(project \S+|instance \S+|operation \S+|token \S+) does not exist$|no network|no firewall rule|unscoped paths/.test(response.json().detail)) return 'hidden'
    return 'allowed'
  }

  /** Routes whose `{project}` is a fleet operator's to name (no project's action): given one that is not a name, so an allowed request changes nothing. */
  const FLEET_PROJECT_ROUTES = new Set(['DELETE /v1/projects/{project}', 'PUT /v1/projects/{project}/quotas'])

  /**
   * The route's path in the project: with IDs that are not IDs (`probe`: the route refuses it once
   * allowed), or with the resources of `resourcesOf` (another project's, to see them hidden).
   */
  function pathOf (verb: string, route: string, project: string, resourcesOf: string | null): string {
    const fixture = resourcesOf === null ? null : fixtures[resourcesOf]!
    return route
      .replace('{project}', resourcesOf === null && FLEET_PROJECT_ROUTES.has(`${verb} ${route}`) ? 'NOT_A_PROJECT' : project)
      .replace('/operations/{id}', `/operations/${fixture?.operationId ?? 'not-an-id'}`)
      .replace('/hosts/{id}', '/hosts/NOT-A-HOST')
      .replace('{id}', fixture?.instanceId ?? 'not-an-id')
      .replace('{network}', fixture?.network ?? 'NOT_A_NETWORK')
      .replace('{rule}', fixture?.ruleId ?? 'not-an-id')
      .replace('{migrationId}', fixture === null ? 'not-an-id' : randomUUID())
      .replace('{tokenId}', fixture?.tokenId ?? 'not-an-id')
  }

  it('answers each token on each route as its role allows, hides every other project and its resources, and lets nothing through that is not allowed', async () => {
    const document = (await api.server.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { requestBody?: unknown, parameters?: Array<{ in: string }> }>> }
    const routes = Object.entries(document.paths).filter(([route]) => route.startsWith('/v1/'))
    const mismatches: string[] = []
    let tried = 0
    for (const [route, operations] of routes) {
      for (const [method, operation] of Object.entries(operations)) {
        const verb = method.toUpperCase()
        // The route's own project, or none (a fleet route); `default` for the unscoped paths.
        const projects: Array<string | null> = route.includes('{project}') ? [...PROJECTS] : /^\/v1\/(instances|networks|firewall-rules|operations)/.test(route) ? ['default'] : [null]
        const namesResource = /\{(id|network|rule|tokenId)\}/.test(route) && !route.startsWith('/v1/hosts') && !route.startsWith('/v1/tokens')
        for (const token of tokens) {
          for (const project of projects) {
            // Probed: an input the route refuses once the policy lets the request through.
            const probeBody = operation.requestBody !== undefined ? { 'not-a-field': true } : undefined
            const probeQuery = operation.parameters?.some((p) => p.in === 'query') === true ? '?not-a-parameter=1' : ''
            const want = expected(token, verb, route, project)
            const probed = await send(verb, pathOf(verb, route, project ?? 'alpha', null) + probeQuery, token.token, probeBody)
            tried++
            if (observed(probed) !== want) mismatches.push(`${token.name} ${verb} ${route} in ${String(project)}: expected ${want}, got ${observed(probed)} (${probed.statusCode} ${probed.body.slice(0, 160)})`)
            if (!namesResource || project === null) continue
            // Another project's resource, under this project's path: hidden, as a missing one, to any role allowed here.
            const other = project === 'alpha' ? 'beta' : 'alpha'
            const crossed = await send(verb, pathOf(verb, route, project, other), token.token)
            tried++
            const wantCrossed = want === 'allowed' ? 'hidden' : want
            if (observed(crossed) !== wantCrossed) mismatches.push(`${token.name} ${verb} ${route} in ${project} naming ${other}'s: expected ${wantCrossed}, got ${observed(crossed)} (${crossed.statusCode} ${crossed.body.slice(0, 160)})`)
          }
        }
      }
    }
    console.log(`tenancy matrix: ${routes.length} paths, ${tokens.length} tokens, ${tried} requests`)
    assert.deepEqual(mismatches, [])
  })

  it('lists only the project\'s own instances, networks, firewall rules and tokens, and only the token\'s own project', async () => {
    for (const token of tokens.filter((t) => t.project !== null && t.refused !== true)) {
      const project = token.project!
      const other = PROJECTS.find((p) => p !== project)!
      const instances = await ok<{ items: Array<{ id: string }> }>(await send('GET', `/v1/projects/${project}/instances`, token.token), 200)
      assert.deepEqual(instances.items.map((i) => i.id), [fixtures[project]!.instanceId], token.name)
      const networks = await ok<{ items: Array<{ name: string }> }>(await send('GET', `/v1/projects/${project}/networks`, token.token), 200)
      assert.deepEqual(networks.items.map((n) => n.name), [fixtures[project]!.network], token.name)
      const rules = await ok<{ items: Array<{ id: string }> }>(await send('GET', `/v1/projects/${project}/firewall-rules`, token.token), 200)
      assert.deepEqual(rules.items.map((r) => r.id), [fixtures[project]!.ruleId], token.name)
      const projects = await ok<{ items: Array<{ name: string }> }>(await send('GET', '/v1/projects', token.token), 200)
      assert.deepEqual(projects.items.map((p) => p.name), [project], token.name)
      assert.equal((await send('GET', `/v1/projects/${other}/instances/${fixtures[other]!.instanceId}`, token.token)).statusCode, 404)
      assert.equal((await send('GET', `/v1/projects/${other}/firewall-rules/${fixtures[other]!.ruleId}`, token.token)).statusCode, 404)
    }
  })

  it('makes no token of a role above the maker\'s: a project\'s admin makes no fleet token, and no project token elsewhere', async () => {
    const admin = tokens.find((t) => t.name === 'alpha-admin')!
    assert.equal((await send('POST', '/v1/tokens', admin.token, { name: 'escalate', role: 'fleet-operator' })).statusCode, 403)
    assert.equal((await send('POST', '/v1/projects/beta/tokens', admin.token, { name: 'escalate', role: 'admin' })).statusCode, 404)
    assert.equal((await send('POST', '/v1/projects/alpha/tokens', admin.token, { name: 'escalate', role: 'fleet-operator' })).statusCode, 400)
  })

  it('keeps no token\'s secret in any row of the database', async () => {
    const { rows: tables } = await api.database.pool.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    const dump: string[] = []
    for (const { tablename } of tables) {
      const { rows } = await api.database.pool.query(`SELECT row_to_json(t)::text AS row FROM "${tablename}" t`)
      dump.push(...rows.map((r) => r.row as string))
    }
    const text = dump.join('\n')
    for (const token of tokens) assert.equal(text.includes(secretOf(token.token)), false, `${token.name}'s secret is in the database`)
  })
})
