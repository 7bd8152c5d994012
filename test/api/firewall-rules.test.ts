/**
 * Firewall rules through the API (api/routes/firewall-rules.ts; docs/design.md §19): a rule made,
 * listed, read and deleted, in the shape the document gives, each change committed under the
 * next generation and told to the hosts by `applyFirewall` under `firewall-<generation>`, with
 * the instances it concerns; bad input refused with a 400 naming what is wrong, a target or peer
 * naming nothing live with a 422, as is a rule past a target's limit, an unknown rule with a 404, each changing nothing and starting
 * nothing; another project's rules hidden as missing ones are; a create retried under its
 * Idempotency-Key answered as the first time, making one rule and starting one workflow.
 *
 * The API runs in process over a real PostgreSQL, with a stub in Temporal's place
 * (helpers/temporal-stub.ts), which records the workflows the API starts.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { firewallWorkflowId, WORKFLOW_TYPES } from '../../contract/workflows.js'
import { LIMITS } from '../../domain/limits.js'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'
const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }
/** A project besides `default`, with a network and a rule of its own, for what must stay hidden. */
const OTHER = 'other'

interface Named { id: string, name: string }

/** How a rule names a network or an instance: by its ID and name alone. */
function namedOf ({ id, name }: Named): Named {
  return { id, name }
}

interface FirewallRule {
  id: string
  target: { network: Named } | { instance: Named }
  direction: string
  protocol: string
  ports: { from: number, to: number } | null
  peer: { cidr: string } | { network: Named } | { instance: Named }
  description: string
  createdAt: string
}

/** A valid create: TCP 8080 into `back`'s instances from `front`'s. */
function validRule (): Record<string, unknown> {
  return { target: { network: 'back' }, protocol: 'tcp', ports: { from: 8080, to: 8080 }, peer: { network: 'front' } }
}

describe('firewall rules through the API', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()
  const networks: Record<string, Named> = {}
  /** `web` on `back`, `client` on `front`: the instances a rule between the two concerns. */
  const instances: Record<string, Named> = {}
  let otherRule: FirewallRule

  async function send (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method, url, headers: { ...auth, ...headers }, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) })
  }

  async function ok<T> (response: LightMyRequestResponse, status: number): Promise<T> {
    assert.equal(response.statusCode, status, response.body)
    return response.json() as T
  }

  async function created (body: unknown, projectPath = '/v1'): Promise<FirewallRule> {
    return await ok<FirewallRule>(await send('POST', `${projectPath}/firewall-rules`, body), 201)
  }

  async function generation (): Promise<number> {
    const { rows } = await api.database.pool.query<{ generation: string }>('SELECT generation FROM firewall_generation')
    return Number(rows[0]!.generation)
  }

  /** The rules' rows and the Temporal calls made so far: what a refused request must leave as it was. */
  async function stateOf (): Promise<{ rules: string[], generation: number, calls: number }> {
    const { rows } = await api.database.pool.query<{ row: string }>('SELECT r::text AS row FROM firewall_rules r ORDER BY id')
    return { rules: rows.map((r) => r.row), generation: await generation(), calls: temporal.calls.length }
  }

  /** Asserts `applyFirewall` was started once under `firewall-<generation>`, for exactly these instances. */
  function assertApplied (generationTaken: number, instanceIds: string[]): void {
    const calls = temporal.callsOf(firewallWorkflowId(generationTaken))
    assert.equal(calls.length, 1, JSON.stringify(calls))
    assert.equal(calls[0]!.call, 'start')
    assert.equal(calls[0]!.workflowType, WORKFLOW_TYPES.firewall)
    const [input] = calls[0]!.args as Array<{ instanceIds: string[] }>
    assert.deepEqual([...input!.instanceIds].sort(), [...instanceIds].sort())
  }

  function assertProblem (response: LightMyRequestResponse, status: number, path: string): void {
    assert.equal(response.statusCode, status, response.body)
    assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
    const problem = response.json() as { status: number, detail: string, errors?: Array<{ path: string }> }
    assert.equal(problem.status, status)
    assert.ok(problem.errors?.some((e) => e.path === path), `${path} is named in ${response.body}`)
  }

  before(async () => {
    api = await startInProcessApi({ temporal })
    for (const [name, cidr] of [['front', '10.71.0.0/24'], ['back', '10.72.0.0/24']] as const) {
      networks[name] = namedOf(await ok<Named>(await send('POST', '/v1/networks', { name, cidr }), 201))
    }
    for (const [name, network] of [['client', 'front'], ['web', 'back']] as const) {
      const accepted = await ok<{ instance: Named }>(await send('POST', '/v1/instances', {
        name, vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux' }, start: false, interfaces: [{ network }]
      }), 202)
      instances[name] = namedOf(accepted.instance)
    }
    await ok(await send('POST', '/v1/projects', { name: OTHER }), 201)
    await ok(await send('POST', `/v1/projects/${OTHER}/networks`, { name: 'back', cidr: '10.73.0.0/24' }), 201)
    otherRule = await created({ target: { network: 'back' }, protocol: 'any', peer: { cidr: '192.168.0.0/16' } }, `/v1/projects/${OTHER}`)
  })
  after(async () => { await api?.stop() })

  it('makes, lists, reads and deletes a rule, each change starting applyFirewall under its generation for the instances it concerns', async () => {
    const before = await generation()
    const rule = await created(validRule())
    assert.deepEqual(rule, {
      id: rule.id,
      target: { network: networks.back },
      direction: 'ingress',
      protocol: 'tcp',
      ports: { from: 8080, to: 8080 },
      peer: { network: networks.front },
      description: '',
      createdAt: rule.createdAt
    })
    assert.match(rule.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    assert.ok(!Number.isNaN(Date.parse(rule.createdAt)), rule.createdAt)
    assert.equal(await generation(), before + 1)
    // Into `back`'s instances from `front`'s: the hosts of both are told, those of `front` to route to `back`.
    assertApplied(before + 1, [instances.web!.id, instances.client!.id])

    // The unscoped paths are the default project's: the same rule under either.
    const listed = await ok<{ items: FirewallRule[] }>(await send('GET', '/v1/firewall-rules'), 200)
    assert.deepEqual(listed.items, [rule])
    assert.deepEqual(await ok(await send('GET', `/v1/firewall-rules/${rule.id}`), 200), rule)
    assert.deepEqual(await ok(await send('GET', `/v1/projects/default/firewall-rules/${rule.id}`), 200), rule)

    const deleted = await send('DELETE', `/v1/projects/default/firewall-rules/${rule.id}`)
    assert.equal(deleted.statusCode, 204, deleted.body)
    assert.equal(deleted.body, '')
    assert.equal(await generation(), before + 2)
    assertApplied(before + 2, [instances.web!.id, instances.client!.id])
    assertProblem(await send('GET', `/v1/firewall-rules/${rule.id}`), 404, 'params.rule')
    assert.deepEqual((await ok<{ items: FirewallRule[] }>(await send('GET', '/v1/firewall-rules'), 200)).items, [])
  })

  it('takes an instance by name or ID as target or peer, an egress direction, an address range and a description; lists oldest first', async () => {
    const before = await generation()
    const toRange = await created({ target: { instance: 'web' }, direction: 'egress', protocol: 'udp', ports: { from: 53, to: 53 }, peer: { cidr: '10.0.0.0/8' }, description: 'DNS' })
    assert.deepEqual([toRange.target, toRange.direction, toRange.ports, toRange.peer, toRange.description],
      [{ instance: instances.web }, 'egress', { from: 53, to: 53 }, { cidr: '10.0.0.0/8' }, 'DNS'])
    // Concerns `web` alone: a range links no network to its own.
    assertApplied(before + 1, [instances.web!.id])

    const fromInstance = await created({ target: { network: networks.back!.id }, protocol: 'icmp', peer: { instance: instances.client!.id } })
    assert.deepEqual([fromInstance.target, fromInstance.ports, fromInstance.peer], [{ network: networks.back }, null, { instance: instances.client }])
    assertApplied(before + 2, [instances.web!.id, instances.client!.id])

    const listed = await ok<{ items: FirewallRule[] }>(await send('GET', '/v1/firewall-rules'), 200)
    assert.deepEqual(listed.items, [toRange, fromInstance])
    for (const rule of listed.items) assert.equal((await send('DELETE', `/v1/firewall-rules/${rule.id}`)).statusCode, 204)
  })

  it('refuses bad input with a 400 naming the offending field, changing nothing and starting nothing', async () => {
    const valid = validRule()
    const { target: _target, ...withoutTarget } = valid
    const { peer: _peer, ...withoutPeer } = valid
    const cases: Array<[string, unknown, string]> = [
      ['a CIDR that is not one', { ...valid, peer: { cidr: '10.0.0.0/33' } }, 'body.peer.cidr'],
      ['a CIDR with host bits set', { ...valid, peer: { cidr: '10.0.0.5/24' } }, 'body.peer.cidr'],
      ['an IPv6 range', { ...valid, peer: { cidr: 'fd00::/64' } }, 'body.peer.cidr'],
      ['ports on icmp', { ...valid, protocol: 'icmp' }, 'body.ports'],
      ['ports on any', { ...valid, protocol: 'any' }, 'body.ports'],
      ['from above to', { ...valid, ports: { from: 9000, to: 8000 } }, 'body.ports'],
      ['port 0', { ...valid, ports: { from: 0, to: 80 } }, 'body.ports.from'],
      ['port 65536', { ...valid, ports: { from: 80, to: 65536 } }, 'body.ports.to'],
      ['a fractional port', { ...valid, ports: { from: 80.5, to: 81 } }, 'body.ports.from'],
      ['ports without to', { ...valid, ports: { from: 80 } }, 'body.ports.to'],
      ['an unknown protocol', { ...valid, protocol: 'sctp' }, 'body.protocol'],
      ['an unknown direction', { ...valid, direction: 'sideways' }, 'body.direction'],
      ['a field the API does not take', { ...valid, action: 'deny' }, 'body'],
      ['no target', withoutTarget, 'body.target'],
      ['no peer', withoutPeer, 'body.peer'],
      ['a target naming both a network and an instance', { ...valid, target: { network: 'back', instance: 'web' } }, 'body.target'],
      ['a target that is not a name', { ...valid, target: { network: 'Not_A_Name' } }, 'body.target.network'],
      ['a peer with a field of its own', { ...valid, peer: { cidr: '10.0.0.0/8', network: 'front' } }, 'body.peer'],
      ['a NUL in the description', { ...valid, description: 'a\u0000b' }, 'body.description'],
      ['an unpaired surrogate in the description', { ...valid, description: 'a\udfff' }, 'body.description'],
      ['an over-long description', { ...valid, description: 'x'.repeat(257) }, 'body.description']
    ]
    const before = await stateOf()
    for (const [what, body, path] of cases) {
      const response = await send('POST', '/v1/firewall-rules', body)
      assert.equal(response.statusCode, 400, `${what}: ${response.body}`)
      assertProblem(response, 400, path)
    }
    assert.deepEqual(await stateOf(), before)
  })

  it('answers 422 for a target or peer that names no live network or instance of the project, changing nothing', async () => {
    await ok(await send('POST', '/v1/networks', { name: 'gone', cidr: '10.74.0.0/24' }), 201)
    assert.equal((await send('DELETE', '/v1/networks/gone')).statusCode, 204)
    const before = await stateOf()
    const cases: Array<[string, unknown, string]> = [
      ['a network nobody made', { ...validRule(), target: { network: 'nowhere' } }, 'body.target'],
      ['an instance nobody made', { ...validRule(), target: { instance: UNKNOWN_ID } }, 'body.target'],
      ['a deleted network', { ...validRule(), target: { network: 'gone' } }, 'body.target'],
      ['a network as the instance it is not', { ...validRule(), target: { instance: 'back' } }, 'body.target'],
      ['a peer instance nobody made', { ...validRule(), peer: { instance: 'nobody' } }, 'body.peer'],
      ['a peer network nobody made', { ...validRule(), peer: { network: UNKNOWN_ID } }, 'body.peer']
    ]
    for (const [what, body, path] of cases) {
      const response = await send('POST', '/v1/firewall-rules', body)
      assert.equal(response.statusCode, 422, `${what}: ${response.body}`)
      assertProblem(response, 422, path)
    }
    assert.deepEqual(await stateOf(), before)
  })

  it('takes as many rules on one network or instance as the limit says, then answers 422 naming the target, changing nothing', async () => {
    await ok(await send('POST', '/v1/networks', { name: 'full', cidr: '10.75.0.0/24' }), 201)
    const rule = (port: number): Record<string, unknown> => ({ target: { network: 'full' }, protocol: 'udp', ports: { from: port, to: port }, peer: { cidr: '10.0.0.0/8' } })
    const made: FirewallRule[] = []
    for (let i = 0; i < LIMITS.firewallRulesPerTarget; i++) made.push(await created(rule(1000 + i)))
    const before = await stateOf()
    const refused = await send('POST', '/v1/firewall-rules', rule(2000))
    assertProblem(refused, 422, 'body.target')
    assert.match(refused.json().detail, new RegExp(`has ${LIMITS.firewallRulesPerTarget} firewall rules`))
    assert.deepEqual(await stateOf(), before)
    assert.equal((await send('DELETE', `/v1/firewall-rules/${made[0]!.id}`)).statusCode, 204)
    await created(rule(2000))
    for (const { id } of (await ok<{ items: FirewallRule[] }>(await send('GET', '/v1/firewall-rules'), 200)).items.filter((r) => 'network' in r.target && r.target.network.name === 'full')) {
      assert.equal((await send('DELETE', `/v1/firewall-rules/${id}`)).statusCode, 204)
    }
  })

  it('answers 404 for an unknown rule, and 400 for a rule ID that is not one', async () => {
    const before = await stateOf()
    assertProblem(await send('GET', `/v1/firewall-rules/${UNKNOWN_ID}`), 404, 'params.rule')
    assertProblem(await send('DELETE', `/v1/firewall-rules/${UNKNOWN_ID}`), 404, 'params.rule')
    assertProblem(await send('GET', '/v1/firewall-rules/not-an-id'), 400, 'params.rule')
    assertProblem(await send('DELETE', '/v1/projects/default/firewall-rules/not-an-id'), 400, 'params.rule')
    assert.deepEqual(await stateOf(), before)
  })

  it("hides another project's rules and resources: absent from the list, 404 to read or delete, 422 to name", async () => {
    const before = await stateOf()
    assert.deepEqual((await ok<{ items: FirewallRule[] }>(await send('GET', '/v1/firewall-rules'), 200)).items, [])
    assertProblem(await send('GET', `/v1/firewall-rules/${otherRule.id}`), 404, 'params.rule')
    assertProblem(await send('DELETE', `/v1/projects/default/firewall-rules/${otherRule.id}`), 404, 'params.rule')
    // The other project's network, by ID: not the project's to name.
    const otherNetwork = otherRule.target as { network: Named }
    assertProblem(await send('POST', '/v1/firewall-rules', { ...validRule(), target: { network: otherNetwork.network.id } }), 422, 'body.target')
    // And its own rule, in its own project, is whole.
    assert.deepEqual(await ok(await send('GET', `/v1/projects/${OTHER}/firewall-rules/${otherRule.id}`), 200), otherRule)
    assert.deepEqual(await stateOf(), before)
  })

  it('answers a create retried under its Idempotency-Key as the first time: one rule, one workflow', async () => {
    const key = { 'idempotency-key': 'firewall-create-1' }
    const before = await generation()
    const first = await send('POST', '/v1/firewall-rules', validRule(), key)
    const rule = await ok<FirewallRule>(first, 201)
    const calls = temporal.calls.length
    const again = await send('POST', '/v1/firewall-rules', validRule(), key)
    assert.equal(again.headers['idempotency-replayed'], 'true')
    assert.deepEqual(await ok(again, 201), rule)
    assert.equal(temporal.calls.length, calls, 'the retry started nothing')
    assert.equal(await generation(), before + 1, 'the retry took no generation')
    assert.deepEqual((await ok<{ items: FirewallRule[] }>(await send('GET', '/v1/firewall-rules'), 200)).items, [rule])
    const another = await send('POST', '/v1/firewall-rules', { ...validRule(), protocol: 'udp' }, key)
    assert.equal(another.statusCode, 422, another.body)
    assert.match(another.json().detail, /Idempotency-Key firewall-create-1 was used for another request/)
  })
})
