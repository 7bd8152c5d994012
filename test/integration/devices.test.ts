/**
 * Real VMs end to end (issue 16's acceptance), through the API against real processes: a real
 * Temporal server and PostgreSQL, the worker, two host agents each in its own network namespace,
 * simulated VMMs, disks made by qemu-img in the storage both hosts mount, seeds made by dosfstools
 * and mtools, TAPs made by iproute2.
 *
 * - One instance with a boot disk, a data disk, an interface and cloud-init: its disks are
 *   overlays (qemu-img info), its TAP is on its network's segment (a bridge and a VXLAN device
 *   named after the network's VNI) in its host's namespace, and the guest's serial log shows the
 *   hostname, address and SSH key it applied.
 * - Stop and start keep the disks: the boot count the guest keeps on its data disk goes on.
 * - Stop removes the TAP and, its last TAP gone, the segment; delete removes the disks, the seed,
 *   the TAP and the segment, and frees the address.
 * - 40 instances created at once on one network get 40 distinct addresses and MACs; a freed
 *   address goes to a new instance only once the old VMM is gone.
 * - The interactive console works through the CLI on a pseudo-terminal.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { segmentBridgeOf, segmentGatewayOf, segmentGatewayPortOf, segmentVxlanOf, vniOfSegmentDevice } from '../../domain/network-segments.js'
import { runCommand } from '../../host-agent/process/command.js'
import { imageInfo } from '../../host-agent/storage/qemu-img.js'
import { STAND_IN_BASE_IMAGE } from '../../stack/hypervisor.js'
import { waitFor } from '../../stack/wait.js'
import { startCliOnTerminal } from '../helpers/cli.js'
import { newInstance, vmmProcesses, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKvmplaneIntegrationTestKey0123456789abcdef tester@example'

interface Disk { id: string, name: string, location: string, state: string }
interface Nic { id: string, ip: string, mac: string, tap: string, released: boolean, network: { name: string } }
type Instance = InstanceBody & { disks: Disk[], interfaces: Nic[] }

describe('real VMs: disks, interfaces, cloud-init and the console', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 2, env: { VMPLANE_HOST_VCPUS: '64' } }) })
  after(async () => { await stack?.stop() })

  const storage = (): string => stack.info.hosts[0]!.storageDir
  const netnsOf = (hostId: string): string => stack.info.hosts.find((host) => host.id === hostId)!.netns

  async function create (body: Record<string, unknown>): Promise<Instance> {
    const created = await api(stack).post<{ instance: Instance }>('/v1/instances', body)
    assert.equal(created.status, 202, JSON.stringify(created.body))
    return created.body.instance
  }

  async function get (id: string): Promise<Instance> {
    return (await api(stack).get<Instance>(`/v1/instances/${id}`)).body
  }

  async function consoleLog (id: string, pattern: RegExp): Promise<string> {
    let last = ''
    return await waitFor(`the serial log of ${id} to match ${pattern}`, async () => {
      const response = await fetch(`${stack.info.apiUrl}/v1/instances/${id}/console/log`, { headers: { authorization: `Bearer ${stack.info.apiToken}` } })
      last = await response.text()
      return response.status === 200 && pattern.test(last) ? last : null
    }, { timeoutMs: 20_000, intervalMs: 100, detail: () => last.slice(-500) })
  }

  async function tapsIn (netns: string): Promise<Array<{ ifname: string, master?: string, flags: string[] }>> {
    return JSON.parse(await runCommand('ip', ['-n', netns, '-json', 'link', 'show', 'type', 'tun']))
  }

  async function firstSector (disk: Disk): Promise<string> {
    const file = await open(join(storage(), disk.location), 'r')
    try {
      const { buffer, bytesRead } = await file.read(Buffer.alloc(512), 0, 512, 0)
      return buffer.subarray(0, bytesRead).toString('latin1').replace(/\0+$/, '')
    } finally {
      await file.close()
    }
  }

  async function segmentsIn (netns: string): Promise<string[]> {
    const links = JSON.parse(await runCommand('ip', ['-n', netns, '-json', 'link', 'show'])) as Array<{ ifname: string }>
    return links.map((link) => link.ifname).filter((name) => vniOfSegmentDevice(name) !== null)
  }

  it("boots an instance from an overlay, with a data disk, a TAP on its network's segment and what cloud-init applied; stop and start keep the disks; delete removes everything", async () => {
    const body = {
      ...newInstance('web-1', 'console=ttyS0 sim.mark_disk=1'),
      sshKeys: [SSH_KEY],
      userData: '#cloud-config\npackages: [nginx]\n'
    }
    const instance = await create(body)
    const running = await waitForState(stack, instance.id, 'running') as Instance
    const [boot, data] = running.disks
    assert.deepEqual(running.disks.map((d) => [d.name, d.state]), [['boot', 'ready'], ['data', 'ready']])

    const overlay = await imageInfo(join(storage(), boot!.location))
    assert.equal(overlay.format, 'qcow2')
    assert.match(overlay.backingFile ?? '', new RegExp(`^${storage()}/images/[0-9a-f]{64}\\.qcow2$`), 'an overlay of the imported base image')
    assert.equal(overlay.virtualSizeBytes, 2 * 1024 ** 3, "the image's size")
    const dataDisk = await imageInfo(join(storage(), data!.location))
    assert.deepEqual([dataDisk.format, dataDisk.virtualSizeBytes, dataDisk.backingFile], ['raw', 1024 ** 3, null])
    assert.ok(existsSync(join(storage(), 'seeds', `${instance.id}.img`)), 'the seed is made')

    const [nic] = running.interfaces
    assert.equal(nic!.network.name, 'default')
    const { vni } = (await api(stack).get<{ vni: number }>('/v1/networks/default')).body
    const hostNetns = netnsOf(running.vmm!.hostId)
    const tap = (await tapsIn(hostNetns)).find((t) => t.ifname === nic!.tap)
    assert.ok(tap !== undefined, `TAP ${nic!.tap} in ${running.vmm!.hostId}'s namespace`)
    assert.equal(tap.master, segmentBridgeOf(vni), "on its network's bridge")
    assert.ok(tap.flags.includes('UP'))
    assert.deepEqual((await segmentsIn(hostNetns)).sort(), [segmentGatewayOf(vni), segmentBridgeOf(vni), segmentGatewayPortOf(vni), segmentVxlanOf(vni)])

    const log = await consoleLog(instance.id, /login: $/)
    assert.match(log, /cloud-init: hostname set to web-1/)
    assert.ok(log.includes(`cloud-init: eth0 (${nic!.mac}) address ${nic!.ip}/16 gateway 10.77.0.1`), log)
    assert.ok(log.includes(`cloud-init: authorized ssh key ${SSH_KEY}`), log)
    assert.match(log, /vdb: vmplane-marker boots=1/)
    assert.equal(await firstSector(data!), 'vmplane-marker boots=1', 'the guest wrote its marker on the data disk')

    assert.equal((await api(stack).post(`/v1/instances/${instance.id}/stop?wait=30`, { graceSeconds: 5 })).status, 200)
    assert.equal((await tapsIn(hostNetns)).some((t) => t.ifname === nic!.tap), false, 'the TAP goes with its VMM')
    assert.deepEqual(await segmentsIn(hostNetns), [], 'and the segment with its last TAP')
    assert.equal((await api(stack).post(`/v1/instances/${instance.id}/start?wait=30`)).status, 200)
    await consoleLog(instance.id, /vdb: vmplane-marker boots=2/)
    assert.equal(await firstSector(data!), 'vmplane-marker boots=2', 'the data disk kept the marker across stop and start')
    const restarted = await get(instance.id)
    assert.deepEqual(restarted.disks.map((d) => d.id), running.disks.map((d) => d.id), 'the same disks')
    assert.equal(restarted.interfaces[0]!.ip, nic!.ip, 'the same address')

    assert.equal((await api(stack).delete(`/v1/instances/${instance.id}?wait=30&graceSeconds=0`)).status, 200)
    const destroyed = await get(instance.id)
    assert.deepEqual(destroyed.disks.map((d) => d.state), ['destroyed', 'destroyed'])
    assert.equal(destroyed.interfaces[0]!.released, true)
    for (const disk of running.disks) assert.equal(existsSync(join(storage(), disk.location)), false, `${disk.location} removed`)
    assert.equal(existsSync(join(storage(), 'seeds', `${instance.id}.img`)), false, 'the seed removed')
    for (const host of stack.info.hosts) {
      assert.deepEqual(await tapsIn(host.netns), [], `no TAP left on ${host.id}`)
      assert.deepEqual(await segmentsIn(host.netns), [], `no segment left on ${host.id}`)
    }
    const network = await api(stack).get<{ addressesInUse: number }>('/v1/networks/default')
    assert.equal(network.body.addressesInUse, 0, 'the address is free again')
  })

  it('gives 40 instances created at once 40 distinct addresses and MACs', async () => {
    const made = await api(stack).post('/v1/networks', { name: 'forty', cidr: '10.78.0.0/24' })
    assert.equal(made.status, 201, JSON.stringify(made.body))
    const instances = await Promise.all(Array.from({ length: 40 }, async (_, i) => await create({
      name: `forty-${i}`, vcpus: 1, memoryMiB: 64, boot: { kernel: 'vmlinux', initramfs: 'initrd.img' }, interfaces: [{ network: 'forty' }]
    })))
    const running = await Promise.all(instances.map(async (instance) => await waitForState(stack, instance.id, 'running', 120_000) as Instance))
    const addresses = new Set(running.map((i) => i.interfaces[0]!.ip))
    const macs = new Set(running.map((i) => i.interfaces[0]!.mac))
    assert.equal(addresses.size, 40, 'distinct addresses')
    assert.equal(macs.size, 40, 'distinct MACs')
    for (const ip of addresses) assert.match(ip, /^10\.78\.0\.\d+$/)
    const taps = (await Promise.all(stack.info.hosts.map(async (host) => await tapsIn(host.netns)))).flat().map((t) => t.ifname)
    assert.deepEqual(new Set(taps), new Set(running.map((i) => i.interfaces[0]!.tap)), 'one TAP per interface, on its VMM\'s host')
    await Promise.all(running.map(async (i) => { await api(stack).delete(`/v1/instances/${i.id}?graceSeconds=0`) }))
    await Promise.all(running.map(async (i) => await waitForState(stack, i.id, 'destroyed', 120_000)))
  })

  it('gives a freed address to a new instance only once the old VMM is gone', async () => {
    // A /29 gives 5 addresses: 5 instances take them all.
    assert.equal((await api(stack).post('/v1/networks', { name: 'five', cidr: '10.79.0.0/29' })).status, 201)
    const cmdline = 'console=ttyS0 sim.ignore_power_button'
    const instances = []
    for (let i = 0; i < 5; i++) {
      instances.push(await create({ name: `five-${i}`, vcpus: 1, memoryMiB: 64, boot: { kernel: 'vmlinux', cmdline }, interfaces: [{ network: 'five' }] }))
    }
    const [old] = await Promise.all(instances.map(async (i) => await waitForState(stack, i.id, 'running') as Instance))
    const newcomer = { name: 'five-new', vcpus: 1, memoryMiB: 64, boot: { kernel: 'vmlinux' }, interfaces: [{ network: 'five' }] }

    // The guest ignores the power button: its VMM lives until the kill at the end of the grace.
    assert.equal((await api(stack).delete(`/v1/instances/${old!.id}?graceSeconds=4`)).status, 202)
    const meanwhile = await api(stack).post('/v1/instances', newcomer)
    assert.equal((await vmmProcesses(stack, old!.vmm!)).length, 1, 'the old VMM still runs')
    assert.equal(meanwhile.status, 409, 'no address while the old VMM may still use it')
    assert.match(JSON.stringify(meanwhile.body), /network five has no free address/)

    await waitForState(stack, old!.id, 'destroyed')
    const reused = await create(newcomer)
    assert.equal(reused.interfaces[0]!.ip, old!.interfaces[0]!.ip, 'the freed address, now that its VMM is gone')
  })

  it('attaches to the interactive console from the CLI on a terminal, echoes what is typed, and leaves on Ctrl-]', async () => {
    const instance = await create({ ...newInstance('console-1'), sshKeys: [SSH_KEY] })
    await waitForState(stack, instance.id, 'running')
    await consoleLog(instance.id, /login: $/)
    const cli = startCliOnTerminal(['instances', 'console', 'console-1'], { env: { VMPLANE_URL: stack.info.apiUrl, VMPLANE_TOKEN: stack.info.apiToken } })
    await waitFor('the CLI attached', async () => cli.screen().includes('Ctrl-] leaves') ? true : null, { timeoutMs: 15_000, detail: cli.screen })
    cli.type('root\r')
    // The terminal turns the guest's \r\n into \r\r\n.
    await waitFor('the echo and a new prompt', async () => /root[\r\n]+console-1 login: /.test(cli.screen()) ? true : null, { timeoutMs: 10_000, detail: cli.screen })
    cli.type('\x1d')
    const result = await cli.result
    assert.equal(result.code, 0, result.stdout)
    assert.match(result.stdout, /left the console/)
  })

  it('refuses the interactive console to a viewer, and a plain GET of it', async () => {
    const instance = await create(newInstance('console-2'))
    await waitForState(stack, instance.id, 'running')
    const plain = await api(stack).get(`/v1/instances/${instance.id}/console`)
    assert.equal(plain.status, 426)
    const cli = startCliOnTerminal(['instances', 'console', instance.id], { env: { VMPLANE_URL: stack.info.apiUrl, VMPLANE_TOKEN: stack.info.viewerToken } })
    const result = await cli.result
    assert.equal(result.code, 1)
    assert.match(result.stdout, /console closed: the interactive console needs a token of role collaborator, admin, fleet-operator/)
  })

  it('lists the stand-in base image on both hosts', async () => {
    const images = await api(stack).get<{ items: Array<{ name: string, format: string, hosts: string[] }> }>('/v1/images')
    const base = images.body.items.find((image) => image.name === STAND_IN_BASE_IMAGE)
    assert.deepEqual([base?.format, base?.hosts], ['qcow2', ['host-1', 'host-2']])
  })
})
