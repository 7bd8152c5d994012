/**
 * `vmplane firewall-rules` run as a child process the way a person or a script runs it: rules
 * created with each kind of target and peer, listed, shown and deleted, as tables for people and
 * as the API's own JSON for scripts, in the project `--project` names; a target or peer given
 * twice or not at all, or ports that are not ports, are usage errors (exit 2) that send nothing;
 * what the API refuses is its detail on one line (exit 1).
 *
 * No stack: the API runs in this process over a real PostgreSQL, listening on 127.0.0.1, with a
 * stub in Temporal's place (helpers/temporal-stub.ts) that takes the `applyFirewall` starts.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { assertOneLineError, runCli, type CliResult } from '../helpers/cli.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

const USAGE = 2
const REFUSED = 1
const OTHER = 'cli-other'
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

interface FirewallRule { id: string, direction: string, description: string }

function field (stdout: string, key: string): string {
  const match = new RegExp(`^${key}: +(.*)$`, 'm').exec(stdout)
  assert.ok(match !== null, `a "${key}:" line in\n${stdout}`)
  return match[1]!
}

function assertSucceeded (result: CliResult): void {
  assert.equal(result.code, 0, `exit 0; stderr:\n${result.stderr}`)
  assert.equal(result.stderr, '', 'nothing on stderr')
}

describe('vmplane firewall-rules', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()
  let env: Record<string, string>

  async function apiGet<T> (path: string): Promise<T> {
    const response = await api.server.inject({ method: 'GET', url: path, headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })
    assert.equal(response.statusCode, 200, response.body)
    return response.json() as T
  }

  async function apiPost (path: string, body: Record<string, unknown>): Promise<void> {
    const response = await api.server.inject({ method: 'POST', url: path, headers: { authorization: `Bearer ${OPERATOR_TOKEN}` }, payload: body })
    assert.ok(response.statusCode === 201 || response.statusCode === 202, response.body)
  }

  const cli = async (...args: string[]) => await runCli(args, { env })
  async function json<T> (...args: string[]): Promise<T> {
    const result = await cli(...args, '--output', 'json')
    assertSucceeded(result)
    return JSON.parse(result.stdout) as T
  }

  before(async () => {
    api = await startInProcessApi({ temporal })
    env = { VMPLANE_URL: await api.server.listen({ host: '127.0.0.1', port: 0 }), VMPLANE_TOKEN: OPERATOR_TOKEN }
    await apiPost('/v1/networks', { name: 'front', cidr: '10.91.0.0/24' })
    await apiPost('/v1/networks', { name: 'back', cidr: '10.92.0.0/24' })
    await apiPost('/v1/instances', { name: 'web', vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux' }, start: false, interfaces: [{ network: 'back' }] })
    await apiPost('/v1/projects', { name: OTHER })
    await apiPost(`/v1/projects/${OTHER}/networks`, { name: 'back', cidr: '10.93.0.0/24' })
  })
  after(async () => { await api?.stop() })

  it('creates, lists, shows and deletes rules: tables for people, the API\'s own JSON for scripts', async () => {
    const made = await cli('firewall-rules', 'create', '--network', 'back', '--protocol', 'tcp', '--ports', '8000-8100', '--peer-network', 'front', '--description', 'web from front')
    assertSucceeded(made)
    const id = field(made.stdout, 'id')
    assert.match(id, new RegExp(`^${UUID}$`))
    assert.deepEqual(['target', 'direction', 'protocol', 'ports', 'peer', 'description'].map((key) => field(made.stdout, key)),
      ['network back', 'ingress', 'tcp', '8000-8100', 'network front', 'web from front'])
    assert.match(field(made.stdout, 'created'), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/)

    const egress = await json<FirewallRule>('firewall-rules', 'create', '--instance', 'web', '--direction', 'egress', '--protocol', 'udp', '--ports', '53', '--peer-cidr', '10.0.0.0/8')
    assert.deepEqual(egress, await apiGet(`/v1/firewall-rules/${egress.id}`))
    assert.deepEqual([egress.direction, egress.description], ['egress', ''])
    const anyFromWeb = await json<FirewallRule>('firewall-rules', 'create', '--network', 'front', '--protocol', 'any', '--peer-instance', 'web')

    const list = await cli('firewall-rules', 'list')
    assertSucceeded(list)
    assert.deepEqual(list.stdout.trim().split('\n').map((line) => line.split(/ {2,}/)), [
      ['TARGET', 'DIRECTION', 'PROTOCOL', 'PORTS', 'PEER', 'DESCRIPTION', 'ID'],
      ['network back', 'ingress', 'tcp', '8000-8100', 'network front', 'web from front', id],
      ['instance web', 'egress', 'udp', '53', '10.0.0.0/8', '-', egress.id],
      ['network front', 'ingress', 'any', '-', 'instance web', '-', anyFromWeb.id]
    ])
    assert.deepEqual(await json('firewall-rules', 'list'), await apiGet('/v1/firewall-rules'))

    const shown = await cli('firewall-rules', 'get', id)
    assertSucceeded(shown)
    assert.equal(shown.stdout, made.stdout)
    assert.deepEqual(await json('firewall-rules', 'get', id), await apiGet(`/v1/firewall-rules/${id}`))

    for (const rule of [id, egress.id, anyFromWeb.id]) {
      const deleted = await cli('firewall-rules', 'delete', rule)
      assertSucceeded(deleted)
      assert.equal(deleted.stdout, `deleted firewall rule ${rule}\n`)
    }
    assertOneLineError(await cli('firewall-rules', 'get', id), REFUSED, new RegExp(`params\\.rule: no firewall rule ${id} \\(HTTP 404\\)$`))
    assert.deepEqual(await json('firewall-rules', 'list'), { items: [] })
  })

  it('acts in the project --project names, and in no other', async () => {
    const made = await json<FirewallRule>('--project', OTHER, 'firewall-rules', 'create', '--network', 'back', '--protocol', 'icmp', '--peer-cidr', '0.0.0.0/0')
    assert.deepEqual(await json('--project', OTHER, 'firewall-rules', 'list'), { items: [made] })
    assert.deepEqual(await json('firewall-rules', 'list'), { items: [] })
    assertOneLineError(await cli('firewall-rules', 'delete', made.id), REFUSED, /no firewall rule .* \(HTTP 404\)$/)
    assertSucceeded(await cli('--project', OTHER, 'firewall-rules', 'delete', made.id))
  })

  it('refuses a target or peer given twice or not at all, ports that are not ports, or an unknown protocol, as usage errors that send nothing', async () => {
    const calls = temporal.calls.length
    const create = ['firewall-rules', 'create', '--protocol', 'tcp']
    assertOneLineError(await cli(...create, '--peer-cidr', '10.0.0.0/8'), USAGE, /no target: give exactly one of --network, --instance$/)
    assertOneLineError(await cli(...create, '--network', 'back', '--instance', 'web', '--peer-cidr', '10.0.0.0/8'), USAGE, /more than one target: give exactly one of --network, --instance$/)
    assertOneLineError(await cli(...create, '--network', 'back'), USAGE, /no peer: give exactly one of --peer-cidr, --peer-network, --peer-instance$/)
    assertOneLineError(await cli(...create, '--network', 'back', '--peer-cidr', '10.0.0.0/8', '--peer-network', 'front'), USAGE, /more than one peer/)
    for (const ports of ['http', '80-', '-80', '80:90']) {
      assertOneLineError(await cli(...create, '--network', 'back', '--peer-network', 'front', '--ports', ports), USAGE, new RegExp(`'--ports <ports>' argument '${ports}' is invalid\\. must be a port or a range of ports`))
    }
    assertOneLineError(await cli('firewall-rules', 'create', '--protocol', 'sctp', '--network', 'back', '--peer-network', 'front'), USAGE, /argument 'sctp' is invalid\. Allowed choices are tcp, udp, icmp, any/)
    assertOneLineError(await cli('firewall-rules', 'create', '--network', 'back', '--peer-network', 'front'), USAGE, /required option '--protocol <protocol>' not specified/)
    assertOneLineError(await cli(...create, '--direction', 'inward', '--network', 'back', '--peer-network', 'front'), USAGE, /argument 'inward' is invalid\. Allowed choices are ingress, egress/)
    assertOneLineError(await cli('firewall-rules', 'get'), USAGE, /missing required argument 'rule'/)
    assert.equal(temporal.calls.length, calls, 'nothing was sent')
    assert.deepEqual(await json('firewall-rules', 'list'), { items: [] })
  })

  it('shows what the API refuses as its detail on one line, exit 1', async () => {
    const create = ['firewall-rules', 'create', '--network', 'back', '--peer-network', 'front']
    assertOneLineError(await cli(...create, '--protocol', 'tcp', '--ports', '0-80'), REFUSED, /body\.ports\.from: .* \(HTTP 400\)$/)
    assertOneLineError(await cli(...create, '--protocol', 'tcp', '--ports', '9000-8000'), REFUSED, /body\.ports: from must be at most to \(HTTP 400\)$/)
    assertOneLineError(await cli(...create, '--protocol', 'icmp', '--ports', '80'), REFUSED, /body\.ports: ports are for tcp and udp \(HTTP 400\)$/)
    assertOneLineError(await cli('firewall-rules', 'create', '--network', 'back', '--protocol', 'any', '--peer-cidr', '10.0.0.5/24'), REFUSED, /body\.peer\.cidr: must be the range's own address.* \(HTTP 400\)$/)
    assertOneLineError(await cli('firewall-rules', 'create', '--network', 'nowhere', '--protocol', 'any', '--peer-network', 'front'), REFUSED, /body\.target: names no live network or instance of the project \(HTTP 422\)$/)
    assertOneLineError(await cli('firewall-rules', 'get', 'not-an-id'), REFUSED, /params\.rule: .* \(HTTP 400\)$/)
    assert.deepEqual(await json('firewall-rules', 'list'), { items: [] })
  })
})
