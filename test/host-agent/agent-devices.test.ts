/**
 * A VMM's devices through a real agent and real simulated VMMs: disks made as qcow2 overlays and
 * sparse raw files with qemu-img, the cloud-init seed made with dosfstools and mtools, TAPs made
 * with iproute2 in the host's network namespace, the serial console logged and relayed over
 * WebSocket, and what stays and goes when a VMM ends (its TAPs go; its disks stay until deleted).
 */
import assert from 'node:assert/strict'
import { segmentBridgeOf } from '../../domain/network-segments.js'
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { WebSocket } from 'ws'
import type { BaseImage, StorageListing, TapView, VmmView } from '../../domain/host-agent-api.js'
import { macOf, tapNameOf } from '../../domain/interfaces.js'
import { runCommand } from '../../host-agent/process/command.js'
import { imageInfo } from '../../host-agent/storage/qemu-img.js'
import { STAND_IN_BASE_IMAGE } from '../../stack/hypervisor.js'
import { waitFor } from '../../stack/wait.js'
import { newVmmId, TestAgent, TOKEN, useAgent } from './helpers/agent.js'

let agent!: TestAgent
useAgent((started) => { agent = started })

const SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKc2vmplaneTestKeyOnlyForTests0123456789ab tester@example'

interface Devices {
  instanceId: string
  bootDiskId: string
  dataDiskId: string
  interfaceId: string
}

function newDevices (): Devices {
  return { instanceId: randomUUID(), bootDiskId: randomUUID(), dataDiskId: randomUUID(), interfaceId: randomUUID() }
}

function ensureBody (devices: Devices, options: { cmdline?: string, vcpus?: number } = {}): object {
  return {
    instanceId: devices.instanceId,
    instanceName: 'web-1',
    spec: {
      vcpus: options.vcpus ?? 1,
      memoryMiB: 256,
      boot: { kernel: 'vmlinux', cmdline: options.cmdline ?? 'console=ttyS0 sim.mark_disk=1' },
      disks: [{ id: devices.bootDiskId, image: STAND_IN_BASE_IMAGE, sizeGiB: 4 }, { id: devices.dataDiskId, sizeGiB: 1 }],
      interfaces: [{ id: devices.interfaceId, address: '10.20.0.5/24', gateway: '10.20.0.1', vni: 4096, outbound: 'none' }],
      cloudInit: { hostname: 'web-1', sshKeys: [SSH_KEY], userData: '#cloud-config\npackages: [nginx]\n' }
    }
  }
}

async function ensureRunning (devices: Devices, options?: { cmdline?: string, vcpus?: number }): Promise<VmmView> {
  const id = newVmmId()
  const created = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody(devices, options))
  assert.equal(created.status, 201, JSON.stringify(created.body))
  return await agent.waitForState(id, 'running')
}

async function consoleLog (vmmId: string): Promise<string> {
  const response = await fetch(`${agent.url}/v1/vmms/${vmmId}/console/log`, { headers: { authorization: `Bearer ${TOKEN}` } })
  assert.equal(response.status, 200)
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain/)
  return await response.text()
}

async function waitForLog (vmmId: string, pattern: RegExp): Promise<string> {
  return await waitFor(`the serial log of ${vmmId} to match ${pattern}`, async () => {
    const log = await consoleLog(vmmId)
    return pattern.test(log) ? log : null
  }, { timeoutMs: 10_000, intervalMs: 50 })
}

async function tap (name: string): Promise<TapView | undefined> {
  return (await agent.request<{ items: TapView[] }>('GET', '/v1/taps')).body.items.find((t) => t.name === name)
}

describe('devices', () => {
  it('lists the base images with format, virtual size and checksum', async () => {
    const { status, body } = await agent.request<{ items: BaseImage[] }>('GET', '/v1/images')
    assert.equal(status, 200)
    const base = body.items.find((image) => image.name === STAND_IN_BASE_IMAGE)
    assert.ok(base !== undefined, JSON.stringify(body))
    assert.equal(base.format, 'qcow2')
    assert.equal(base.virtualSizeBytes, 2 * 1024 ** 3)
    assert.match(base.sha256, /^[0-9a-f]{64}$/)
    assert.ok(!body.items.some((image) => image.name === 'vmlinux'), 'a kernel is not a base image')
  })

  it('boots a VMM with a boot overlay, a data disk, a TAP and a cloud-init seed, and the guest applies them', async () => {
    const devices = newDevices()
    const vmm = await ensureRunning(devices)

    const boot = await imageInfo(join(agent.storageDir, 'disks', `${devices.bootDiskId}.qcow2`))
    assert.equal(boot.format, 'qcow2')
    assert.equal(boot.virtualSizeBytes, 4 * 1024 ** 3)
    assert.match(boot.backingFile ?? '', new RegExp(`^${agent.storageDir}/images/[0-9a-f]{64}\\.qcow2$`), 'backed by the imported base, by absolute path')
    const data = await imageInfo(join(agent.storageDir, 'disks', `${devices.dataDiskId}.raw`))
    assert.deepEqual([data.format, data.virtualSizeBytes, data.backingFile], ['raw', 1024 ** 3, null])
    assert.ok((await stat(join(agent.storageDir, 'seeds', `${devices.instanceId}.img`))).isFile())

    const tapName = tapNameOf(devices.interfaceId)
    assert.deepEqual(await tap(tapName), { name: tapName, vmmId: vmm.id, multiQueue: false, bridge: segmentBridgeOf(4096), up: true })

    const log = await waitForLog(vmm.id, /login: $/)
    assert.match(log, /cloud-init: hostname set to web-1/)
    assert.match(log, new RegExp(`cloud-init: eth0 \\(${macOf(devices.interfaceId)}\\) address 10\\.20\\.0\\.5/24 gateway 10\\.20\\.0\\.1`))
    assert.ok(log.includes(`cloud-init: authorized ssh key ${SSH_KEY}`), log)
    assert.match(log, /cloud-init: user-data 32 bytes \(#cloud-config\)/)
    assert.match(log, /vdb: vmplane-marker boots=1/)
  })

  it('makes a multi-queue TAP for a VMM with more than one queue pair', async () => {
    const devices = newDevices()
    const vmm = await ensureRunning(devices, { vcpus: 2 })
    assert.equal((await tap(tapNameOf(devices.interfaceId)))?.multiQueue, true)
    await waitForLog(vmm.id, /eth0: .*, 2 queue pair\(s\)/)
  })

  it('removes the TAP once the VMM is gone and keeps the disks, which the next VMM finds', async () => {
    const devices = newDevices()
    const first = await ensureRunning(devices)
    await waitForLog(first.id, /boots=1/)
    assert.equal((await agent.request('DELETE', `/v1/vmms/${first.id}`)).status, 200)
    assert.equal(await tap(tapNameOf(devices.interfaceId)), undefined, 'the TAP is gone with its VMM')

    const second = await ensureRunning(devices)
    const log = await waitForLog(second.id, /login: $/)
    assert.match(log, /vdb: vmplane-marker boots=2/, 'the data disk kept what the first VMM wrote')
    assert.equal(log.match(/cloud-init: hostname set to web-1/g)?.length, 1)
  })

  it('refuses to remove a disk, a seed or a TAP a live VMM uses, and removes them once it is gone', async () => {
    const devices = newDevices()
    const vmm = await ensureRunning(devices)
    const tapName = tapNameOf(devices.interfaceId)
    assert.equal((await agent.request('DELETE', `/v1/storage/disks/${devices.bootDiskId}`)).status, 409)
    assert.equal((await agent.request('DELETE', `/v1/storage/seeds/${devices.instanceId}`)).status, 409)
    assert.equal((await agent.request('DELETE', `/v1/taps/${tapName}`)).status, 409)

    await agent.request('DELETE', `/v1/vmms/${vmm.id}`)
    for (const id of [devices.bootDiskId, devices.dataDiskId]) {
      assert.deepEqual((await agent.request('DELETE', `/v1/storage/disks/${id}`)).body, { removed: true })
      assert.deepEqual((await agent.request('DELETE', `/v1/storage/disks/${id}`)).body, { removed: false }, 'idempotent')
    }
    assert.deepEqual((await agent.request('DELETE', `/v1/storage/seeds/${devices.instanceId}`)).body, { removed: true })
    const listing = (await agent.request<StorageListing>('GET', '/v1/storage')).body
    assert.ok(!listing.disks.some((disk) => disk.diskId === devices.bootDiskId || disk.diskId === devices.dataDiskId))
    assert.ok(!listing.seeds.some((seed) => seed.instanceId === devices.instanceId))
  })

  it('reaps a TAP no VMM owns on request', async () => {
    const orphan = tapNameOf(randomUUID())
    await runCommand('ip', ['-n', agent.network.netns, 'tuntap', 'add', 'dev', orphan, 'mode', 'tap'])
    assert.equal((await tap(orphan))?.vmmId, null)
    assert.deepEqual((await agent.request('DELETE', `/v1/taps/${orphan}`)).body, { removed: true })
    assert.equal(await tap(orphan), undefined)
  })

  it('relays the serial console over WebSocket: the guest prints its prompt and echoes what is typed', async () => {
    const devices = newDevices()
    const vmm = await ensureRunning(devices)
    await waitForLog(vmm.id, /login: $/)
    await agent.typeAtConsole(vmm.id, 'root\r', /root\r\nweb-1 login: $/)
    assert.match(await consoleLog(vmm.id), /web-1 login: root\r\nweb-1 login: $/, 'the log has the session too')
  })

  it('after an agent restart, adopts the VMM and relays its console again; the log goes on', async () => {
    const devices = newDevices()
    const vmm = await ensureRunning(devices)
    await waitForLog(vmm.id, /login: $/)
    await agent.kill()
    await agent.start()
    await agent.waitForState(vmm.id, 'running')
    const socket = new WebSocket(`${agent.url.replace('http', 'ws')}/v1/vmms/${vmm.id}/console`, { headers: { authorization: `Bearer ${TOKEN}` } })
    await new Promise((resolve, reject) => { socket.once('open', resolve).once('error', reject) })
    // The relay reconnects to the VMM's serial socket in the background; type until it echoes.
    await waitFor('the echo through the restarted agent', async () => {
      socket.send(Buffer.from('x'))
      return /web-1 login: x/.test(await consoleLog(vmm.id)) ? true : null
    }, { timeoutMs: 10_000, intervalMs: 300 })
    socket.close()
    const log = await consoleLog(vmm.id)
    assert.equal(log.match(/cloud-init: hostname set to web-1/g)?.length, 1, 'the log from before the restart is kept, not repeated')
  })

  it('removes the files it left half-made when it restarts, and leaves another host\'s alone', async () => {
    const own = join(agent.storageDir, 'partial', `host-test.${randomUUID()}`)
    const other = join(agent.storageDir, 'partial', `host-other.${randomUUID()}`)
    for (const file of [own, other]) await writeFile(file, 'half made\n')
    await agent.kill()
    await agent.start()
    assert.equal(existsSync(own), false, 'its own partial file is gone')
    assert.equal(existsSync(other), true, "another host's is left to the reconciler")
    await rm(other)
  })

  it('refuses a WebSocket console without the token, and a plain GET of it with 426', async () => {
    const devices = newDevices()
    const vmm = await ensureRunning(devices)
    const plain = await agent.request('GET', `/v1/vmms/${vmm.id}/console`)
    assert.equal(plain.status, 426)
    const socket = new WebSocket(`${agent.url.replace('http', 'ws')}/v1/vmms/${vmm.id}/console`)
    const status = await new Promise<number>((resolve) => {
      socket.once('unexpected-response', (_request, response) => { resolve(response.statusCode ?? 0) })
      socket.once('open', () => { resolve(101) })
    })
    assert.equal(status, 401)
  })
})
