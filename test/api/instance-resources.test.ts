/**
 * A create's disks, interfaces and cloud-init, and networks, refused for what cannot be (issue 16,
 * "bad input"): an image no host has, a disk the storage has no room for, a network with no free
 * address, an address outside its network or already taken, a range overlapping another network,
 * user-data over the limit, a name that escapes its directory. Each answer is a 4xx problem that
 * names the field, and nothing is created: no instance, disk, interface or network row.
 *
 * The API runs in process over a real PostgreSQL; what the hosts announce (their storage and
 * images) and what other instances hold are rows written here, as heartbeats and creates would.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { macOf } from '../../domain/interfaces.js'
import { LIMITS } from '../../domain/limits.js'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'

const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }
const IMAGE = 'debian-12.qcow2'
const GIB = 1024 ** 3

function create (extra: Record<string, unknown>): Record<string, unknown> {
  return { name: 'resources', vcpus: 1, memoryMiB: 256, start: false, boot: { kernel: 'vmlinux' }, ...extra }
}

function assertProblem (response: LightMyRequestResponse, status: number, path: string): void {
  assert.equal(response.statusCode, status, response.body)
  assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
  const problem = response.json()
  assert.ok(problem.errors?.some((e: { path: string }) => e.path === path), `${response.body} names ${path}`)
}

describe('the resources of a create, refused for what cannot be', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  let holder: string
  before(async () => {
    api = await startInProcessApi()
    const db = api.database.pool
    await db.query("INSERT INTO hosts (id, agent_url, vcpus, memory_mib, storage_gib) VALUES ('host-1', 'http://127.0.0.1:1', 8, 8192, 100)")
    await db.query("INSERT INTO host_images (host_id, name, format, virtual_size_bytes, sha256) VALUES ('host-1', $1, 'qcow2', $2, $3)", [IMAGE, 2 * GIB, 'a'.repeat(64)])
    // Another instance holding 10.9.0.10 on `full` (a /30: that is its only address) and on `wide`.
    const networks = { full: '10.8.0.0/30', wide: '10.9.0.0/24' }
    for (const [name, cidr] of Object.entries(networks)) {
      await db.query("INSERT INTO networks (id, project_id, name, cidr, gateway) VALUES ($1, (SELECT id FROM projects WHERE name = 'default'), $2, $3, host(network($3::cidr) + 1)::inet)", [randomUUID(), name, cidr])
    }
    holder = randomUUID()
    await db.query("INSERT INTO instances (id, project_id, name, vcpus, memory_mib, boot, stop_grace_seconds, state, intended_state) VALUES ($1, (SELECT id FROM projects WHERE name = 'default'), 'holder', 1, 256, '{}', 30, 'stopped', 'stopped')", [holder])
    for (const [network, ip] of [['full', '10.8.0.2'], ['wide', '10.9.0.10']]) {
      const id = randomUUID()
      await db.query('INSERT INTO interfaces (id, instance_id, network_id, slot, ip, mac) SELECT $1, $2, id, 0, $4, $5 FROM networks WHERE name = $3',
        [id, holder, network, ip, macOf(id)])
    }
  })
  after(async () => { await api?.stop() })

  async function rowCounts (): Promise<Record<string, number>> {
    const { rows } = await api.database.pool.query(
      `SELECT (SELECT count(*)::int FROM instances) AS instances, (SELECT count(*)::int FROM disks) AS disks,
              (SELECT count(*)::int FROM interfaces) AS interfaces, (SELECT count(*)::int FROM networks) AS networks`)
    return { ...rows[0] }
  }

  async function refused (payload: Record<string, unknown>, status: number, path: string, url = '/v1/instances'): Promise<void> {
    const before = await rowCounts()
    assertProblem(await api.server.inject({ method: 'POST', url, headers: auth, payload }), status, path)
    assert.deepEqual(await rowCounts(), before, `${path}: nothing is created`)
  }

  it('refuses an image no host has, and a boot disk smaller than its image', async () => {
    await refused(create({ bootDisk: { image: 'nope.qcow2' } }), 422, 'body.bootDisk.image')
    await refused(create({ bootDisk: { image: IMAGE, sizeGiB: 1 } }), 422, 'body.bootDisk.sizeGiB')
  })

  it('refuses disks the storage has no room for, naming the largest', async () => {
    await refused(create({ bootDisk: { image: IMAGE }, dataDisks: [{ name: 'small', sizeGiB: 1 }, { name: 'huge', sizeGiB: 99 }] }), 409, 'body.dataDisks.1.sizeGiB')
    await refused(create({ bootDisk: { image: IMAGE, sizeGiB: 101 } }), 409, 'body.bootDisk.sizeGiB')
  })

  it('refuses an address outside the network, reserved in it or taken, and a network with no free address', async () => {
    await refused(create({ interfaces: [{ network: 'wide', ip: '10.10.0.5' }] }), 422, 'body.interfaces.0.ip')
    for (const ip of ['10.9.0.0', '10.9.0.1', '10.9.0.255']) await refused(create({ interfaces: [{ network: 'wide', ip }] }), 422, 'body.interfaces.0.ip')
    await refused(create({ interfaces: [{ network: 'wide' }, { network: 'wide', ip: '10.9.0.10' }] }), 409, 'body.interfaces.1.ip')
    await refused(create({ interfaces: [{ network: 'full' }] }), 409, 'body.interfaces.0.network')
    await refused(create({ interfaces: [{ network: 'nowhere' }] }), 422, 'body.interfaces.0.network')
  })

  it('refuses user-data over the limit, cloud-init without a boot disk, and keys that are not keys', async () => {
    await refused(create({ bootDisk: { image: IMAGE }, userData: 'x'.repeat(LIMITS.userDataBytes + 1) }), 400, 'body.userData')
    await refused(create({ bootDisk: { image: IMAGE }, userData: 'é'.repeat(LIMITS.userDataBytes / 2 + 1) }), 400, 'body.userData')
    await refused(create({ bootDisk: { image: IMAGE }, userData: '#cloud-config\u0000' }), 400, 'body.userData')
    await refused(create({ userData: '#cloud-config\n' }), 400, 'body.userData')
    await refused(create({ bootDisk: { image: IMAGE }, sshKeys: ['not a key'] }), 400, 'body.sshKeys.0')
  })

  it('refuses names that escape their directory or are not names', async () => {
    for (const image of ['../etc/passwd', '/etc/passwd', 'a/../../b', '.hidden']) await refused(create({ bootDisk: { image } }), 400, 'body.bootDisk.image')
    await refused(create({ dataDisks: [{ name: '../x', sizeGiB: 1 }] }), 400, 'body.dataDisks.0.name')
    await refused(create({ dataDisks: [{ name: 'boot', sizeGiB: 1 }] }), 400, 'body.dataDisks.0.name')
    await refused(create({ dataDisks: [{ name: 'd', sizeGiB: 1 }, { name: 'd', sizeGiB: 2 }] }), 400, 'body.dataDisks.1.name')
    await refused(create({ interfaces: [{ network: '../wide' }] }), 400, 'body.interfaces.0.network')
  })

  it('refuses a network that overlaps another, that is not a range, whose gateway is outside it, whose way out is none of the two, or whose name is taken', async () => {
    await refused({ name: 'over', cidr: '10.9.0.128/25' }, 409, 'body.cidr', '/v1/networks')
    await refused({ name: 'bits', cidr: '10.11.0.5/24' }, 400, 'body.cidr', '/v1/networks')
    await refused({ name: 'huge', cidr: '10.0.0.0/8' }, 400, 'body.cidr', '/v1/networks')
    await refused({ name: 'away', cidr: '10.12.0.0/24', gateway: '10.13.0.1' }, 422, 'body.gateway', '/v1/networks')
    await refused({ name: 'edge', cidr: '10.12.0.0/24', gateway: '10.12.0.255' }, 422, 'body.gateway', '/v1/networks')
    await refused({ name: 'open', cidr: '10.12.0.0/24', outbound: 'open' }, 400, 'body.outbound', '/v1/networks')
    await refused({ name: 'wide', cidr: '10.14.0.0/24' }, 409, 'body.name', '/v1/networks')
  })

  it('refuses to delete a network a live interface uses, and deletes one none does', async () => {
    const inUse = await api.server.inject({ method: 'DELETE', url: '/v1/networks/wide', headers: auth })
    assertProblem(inUse, 409, 'params.network')
    const made = await api.server.inject({ method: 'POST', url: '/v1/networks', headers: auth, payload: { name: 'spare', cidr: '10.15.0.0/24' } })
    assert.equal(made.statusCode, 201, made.body)
    const network = made.json() as { vni: number }
    assert.ok(Number.isInteger(network.vni) && network.vni >= 4096, `a VNI of its own: ${made.body}`)
    assert.deepEqual({ ...network, id: undefined, createdAt: undefined, vni: undefined },
      { id: undefined, name: 'spare', cidr: '10.15.0.0/24', gateway: '10.15.0.1', vni: undefined, mtu: 1500, outbound: 'none', addressesInUse: 0, addressesTotal: 253, createdAt: undefined })
    assert.equal((await api.server.inject({ method: 'DELETE', url: '/v1/networks/spare', headers: auth })).statusCode, 204)
    assert.equal((await api.server.inject({ method: 'GET', url: '/v1/networks/spare', headers: auth })).statusCode, 404)
  })
})
