/**
 * The simulator's devices, as the real program handles them (docs/simulator.md, "Devices"):
 * disks opened, type-checked and locked at boot; TAPs opened by name without CAP_NET_ADMIN;
 * the serial port on a socket. Each VMM here runs as the agent runs it: inside a network
 * namespace of its own, with CAP_NET_ADMIN dropped.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { connect } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { vmmCommandPrefix } from '../../host-agent/cloud-hypervisor/launch.js'
import { runCommand } from '../../host-agent/process/command.js'
import { createHostNetwork, type HostNetwork } from '../../stack/host-network.js'
import { waitFor } from '../../stack/wait.js'
import { SimulatedVmm, useWorkspace } from './helpers/simulator.js'

const workspace = useWorkspace('vmp-simdev-')
let network: HostNetwork
const vmms: SimulatedVmm[] = []

before(async () => { network = await createHostNetwork('sim') })
after(async () => {
  for (const vmm of vmms) await vmm.stop()
  await network?.remove()
})

async function start (): Promise<SimulatedVmm> {
  const vmm = await SimulatedVmm.start(await workspace.nextDir(), vmmCommandPrefix(network.netns, true))
  vmms.push(vmm)
  return vmm
}

function config (vmm: SimulatedVmm, devices: { disks?: unknown[], net?: unknown[], cmdline?: string }): unknown {
  return {
    payload: { kernel: workspace.kernel, cmdline: devices.cmdline ?? 'console=ttyS0' },
    serial: { mode: 'Socket', socket: vmm.paths.console },
    console: { mode: 'Off' },
    disks: devices.disks,
    net: devices.net
  }
}

/** Creates and boots; returns vm.boot's answer. */
async function boot (vmm: SimulatedVmm, devices: { disks?: unknown[], net?: unknown[], cmdline?: string }): Promise<{ status: number, json: unknown }> {
  const created = await vmm.callJson('PUT', 'vm.create', config(vmm, devices))
  assert.equal(created.status, 204, JSON.stringify(created.json))
  return await vmm.callJson('PUT', 'vm.boot')
}

async function image (name: string, ...args: string[]): Promise<string> {
  const path = join(workspace.dir, name)
  await runCommand('qemu-img', ['create', '-q', ...args.slice(0, -1), path, args.at(-1)!])
  return path
}

describe('disks', () => {
  it('boots with a qcow2 overlay (backing_files) and a raw disk, and answers the real chains for what it cannot open', async () => {
    const base = await image('base.raw', '-f', 'raw', '16M')
    const overlay = await image('overlay.qcow2', '-f', 'qcow2', '-b', base, '-F', 'raw', '1G')
    const data = await image('data.raw', '-f', 'raw', '1G')
    const good = await start()
    assert.equal((await boot(good, { disks: [{ path: overlay, image_type: 'Qcow2', backing_files: true }, { path: data, image_type: 'Raw' }] })).status, 204)
    await good.stop()

    const cases: Array<[unknown, string[]]> = [
      [{ path: overlay, image_type: 'Qcow2' }, ['Cannot open disk path', 'Failure in qcow', 'Backing file support is disabled']],
      [{ path: overlay, image_type: 'Raw' }, ['Disk image type mismatch: specified Raw, detected Qcow2']],
      [{ path: join(workspace.dir, 'missing.raw'), image_type: 'Raw' }, ['Cannot open disk path', 'No such file or directory (os error 2)']]
    ]
    for (const [disk, chain] of cases) {
      const vmm = await start()
      const answer = await boot(vmm, { disks: [disk] })
      assert.equal(answer.status, 500)
      assert.deepEqual(answer.json, ['Error from API', 'The VM could not boot', 'Error from device manager', ...chain])
      await vmm.stop()
    }
  })

  it('locks a writable disk: a second VMM on it fails to boot, and may once the first is gone', async () => {
    const disk = await image('shared.raw', '-f', 'raw', '1G')
    const first = await start()
    assert.equal((await boot(first, { disks: [{ path: disk, image_type: 'Raw' }] })).status, 204)
    const second = await start()
    const refused = await boot(second, { disks: [{ path: disk, image_type: 'Raw' }] })
    assert.equal(refused.status, 500)
    assert.deepEqual((refused.json as string[]).slice(3, 4), ['Cannot lock images of all block devices'])
    await first.stop()
    assert.equal((await second.callJson('PUT', 'vm.boot')).status, 204)
  })
})

describe('network', () => {
  it('opens a TAP made for it without CAP_NET_ADMIN, and fails with EPERM on a missing one or a queue mismatch', async () => {
    await runCommand('ip', ['-n', network.netns, 'tuntap', 'add', 'dev', 'vmpsingle', 'mode', 'tap', 'user', '0', 'vnet_hdr'])
    await runCommand('ip', ['-n', network.netns, 'link', 'set', 'vmpsingle', 'up'])
    const good = await start()
    assert.equal((await boot(good, { net: [{ tap: 'vmpsingle', mac: '02:00:00:00:00:01', num_queues: 2 }] })).status, 204)

    const missing = await start()
    const refused = await boot(missing, { net: [{ tap: 'vmpmissing', mac: '02:00:00:00:00:02' }] })
    assert.deepEqual(refused, {
      status: 500,
      json: ['Error from API', 'The VM could not boot', 'Error from device manager', 'Cannot open tap interface',
        'Open tap device failed', 'Unable to configure tap interface', 'Operation not permitted (os error 1)']
    })
    assert.ok(!(await runCommand('ip', ['-n', network.netns, 'link', 'show'])).includes('vmpmissing'), 'the VMM created no TAP')

    const mismatch = await start()
    const multi = await boot(mismatch, { net: [{ tap: 'vmpsingle', mac: '02:00:00:00:00:03', num_queues: 4 }] })
    assert.equal(multi.status, 500)
    assert.equal((multi.json as string[]).at(-1), 'Invalid argument (os error 22)')
  })
})

describe('serial socket', () => {
  it('buffers what the guest printed before a client connected, serves one client at a time and echoes input', async () => {
    const vmm = await start()
    assert.equal((await boot(vmm, {})).status, 204)
    const read = (socket: ReturnType<typeof connect>): { text: () => string } => {
      let text = ''
      socket.on('data', (chunk: Buffer) => { text += chunk.toString() })
      return { text: () => text }
    }
    const first = connect(vmm.paths.console)
    const firstOutput = read(first)
    await once(first, 'connect')
    await waitFor('the buffered boot log', async () => /Linux version[\s\S]*login: $/.test(firstOutput.text()) ? true : null, { timeoutMs: 3000, intervalMs: 20 })

    const second = connect(vmm.paths.console)
    const secondOutput = read(second)
    await once(second, 'connect')
    await once(first, 'close')
    second.write('ls\r')
    await waitFor('the echo', async () => secondOutput.text() === 'ls\r\nlocalhost login: ' ? true : null, { timeoutMs: 3000, intervalMs: 20 })
    second.destroy()
  })
})
