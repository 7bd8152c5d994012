/**
 * The simulated guest's network (docs/simulator.md, "Guest network"): a stack on its TAPs with
 * the addresses its cloud-init seed gives, answering ping and the TCP echo of sim.echo_port,
 * probing its peers from its console, silent while paused. As the agent runs them, each VMM
 * runs in the host's network namespace without CAP_NET_ADMIN, on TAPs the agent's TapDevices
 * made beforehand, here attached to one bridge of the test's, which has an address on the
 * guests' subnet so that the host can probe them.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { readFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { VmmInterface } from '../../domain/host-agent-api.js'
import { macOf } from '../../domain/interfaces.js'
import { GUEST_MTU, VNI_RANGE } from '../../domain/network-segments.js'
import { vmmCommandPrefix } from '../../host-agent/cloud-hypervisor/launch.js'
import { TapDevices } from '../../host-agent/network/taps.js'
import { runCommand } from '../../host-agent/process/command.js'
import { buildSeed, seedFiles, writeSeedImage } from '../../host-agent/storage/cloud-init-seed.js'
import { createHostNetwork, type HostNetwork } from '../../stack/host-network.js'
import { waitFor } from '../../stack/wait.js'
import { guestProbe, ping, tcpEcho } from '../helpers/net-probe.js'
import { SimulatedVmm, useWorkspace } from './helpers/simulator.js'

const workspace = useWorkspace('vmp-simnet-')
let network: HostNetwork
let taps: TapDevices
const vmms: SimulatedVmm[] = []

const BRIDGE = 'vmpsimbr0'
const GATEWAY = '10.77.0.1'
/** An address of the host's namespace off the guests' subnet: reached through their default route. */
const OFF_SUBNET = '192.0.2.1'
const ECHO_PORT = 7

before(async () => {
  network = await createHostNetwork('simnet')
  taps = new TapDevices(network.netns)
  await runCommand('ip', ['-n', network.netns, '-batch', '-'], {
    input: [`link add ${BRIDGE} type bridge`, `link set ${BRIDGE} up`, `addr add ${GATEWAY}/24 dev ${BRIDGE}`, `addr add ${OFF_SUBNET}/32 dev lo`].join('\n') + '\n'
  })
})
after(async () => {
  for (const vmm of vmms) await vmm.stop()
  await network?.remove()
})

interface Guest {
  vmm: SimulatedVmm
  address: string
}

/**
 * Boots a guest on a new TAP with the agent's seed, which gives it `address`/24, the gateway and
 * the guests' MTU (or `mtu`, when given).
 */
async function bootGuest (name: string, address: string, options: { queuePairs?: number, mtu?: number, cmdline?: string } = {}): Promise<Guest> {
  const interfaceId = randomUUID()
  const mac = macOf(interfaceId)
  const queuePairs = options.queuePairs ?? 1
  const tap = `vmpnet${name}`
  await taps.ensure(tap, queuePairs > 1, BRIDGE)
  const seed = join(workspace.dir, `${name}-seed.img`)
  const nic = { id: interfaceId, address: `${address}/24`, gateway: GATEWAY, vni: VNI_RANGE.min, outbound: 'none' as const }
  if (options.mtu !== undefined) await buildSeedWithMtu(seed, name, nic, options.mtu)
  else await buildSeed(seed, `i-${name}`, { hostname: name, sshKeys: [] }, [nic])
  const vmm = await SimulatedVmm.start(await workspace.nextDir(), vmmCommandPrefix(network.netns, true))
  vmms.push(vmm)
  const created = await vmm.callJson('PUT', 'vm.create', {
    payload: { kernel: workspace.kernel, cmdline: `console=ttyS0 sim.echo_port=${ECHO_PORT} ${options.cmdline ?? ''}`.trim() },
    cpus: { boot_vcpus: queuePairs, max_vcpus: queuePairs },
    serial: { mode: 'Socket', socket: vmm.paths.console },
    console: { mode: 'Off' },
    disks: [{ path: seed, readonly: true, image_type: 'Raw' }],
    net: [{ tap, mac, num_queues: 2 * queuePairs }]
  })
  assert.equal(created.status, 204, JSON.stringify(created.json))
  const booted = await vmm.callJson('PUT', 'vm.boot')
  assert.equal(booted.status, 204, JSON.stringify(booted.json))
  return { vmm, address }
}

/** The agent's seed with another `mtu` in the interface's network-config. */
async function buildSeedWithMtu (image: string, name: string, nic: VmmInterface, mtu: number): Promise<void> {
  const files = seedFiles(`i-${name}`, { hostname: name, sshKeys: [] }, [nic])
  const networkConfig = JSON.parse(files['network-config']!) as { ethernets: Record<string, Record<string, unknown>> }
  networkConfig.ethernets.eth0!.mtu = mtu
  await writeSeedImage(image, { ...files, 'network-config': JSON.stringify(networkConfig) })
}

/** What the guest printed up to its login prompt. */
async function bootLog (vmm: SimulatedVmm): Promise<string> {
  const socket = connect(vmm.paths.console)
  let output = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  try {
    await once(socket, 'connect')
    return await waitFor('the login prompt', async () => output.endsWith('login: ') ? output : null, { timeoutMs: 3000, intervalMs: 20 })
  } finally {
    socket.destroy()
  }
}

describe('a guest on its TAP', () => {
  let guest: Guest

  before(async () => { guest = await bootGuest('a', '10.77.0.10') })

  it('brings up its address from the seed and says so in its boot log', async () => {
    const log = await bootLog(guest.vmm)
    assert.match(log, /cloud-init: eth0 \([0-9a-f:]+\) address 10\.77\.0\.10\/24 gateway 10\.77\.0\.1\n/)
    assert.match(log, new RegExp(`cloud-init: user-data \\d+ bytes \\(#cloud-config\\)\\n\\[ {4}1\\.100000\\] eth0: 10\\.77\\.0\\.10/24 up, mtu ${GUEST_MTU}\\n\\nDebian`),
      'after cloud-init, before the prompt')
  })

  it('answers ping from the host', async () => {
    assert.deepEqual(await ping(network.netns, guest.address), { sent: 3, received: 3 })
  })

  it('echoes TCP on sim.echo_port, and refuses another port', async () => {
    assert.equal(await tcpEcho(network.netns, guest.address, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok')
    assert.equal(await tcpEcho(network.netns, guest.address, ECHO_PORT + 1, { timeoutMs: 2000 }), 'refused')
  })

  it('stops answering while paused, and answers again once resumed', async () => {
    assert.equal((await guest.vmm.callJson('PUT', 'vm.pause')).status, 204)
    assert.deepEqual(await ping(network.netns, guest.address, { count: 2 }), { sent: 2, received: 0 })
    assert.equal(await tcpEcho(network.netns, guest.address, ECHO_PORT, { timeoutMs: 1000 }), 'timed out')
    assert.equal((await guest.vmm.callJson('PUT', 'vm.resume')).status, 204)
    assert.deepEqual(await ping(network.netns, guest.address), { sent: 3, received: 3 })
    assert.equal(await tcpEcho(network.netns, guest.address, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok')
  })

  it('comes back on a reboot, and goes silent on a shutdown', async () => {
    assert.equal((await guest.vmm.callJson('PUT', 'vm.reboot')).status, 204)
    assert.deepEqual(await ping(network.netns, guest.address), { sent: 3, received: 3 })
    assert.equal(await tcpEcho(network.netns, guest.address, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok')
    assert.equal((await guest.vmm.callJson('PUT', 'vm.shutdown')).status, 204)
    assert.deepEqual(await ping(network.netns, guest.address, { count: 2 }), { sent: 2, received: 0 })
  })
})

describe('two guests on one bridge', () => {
  let first: Guest
  let second: Guest

  before(async () => {
    first = await bootGuest('b', '10.77.0.11')
    second = await bootGuest('c', '10.77.0.12', { mtu: 1400, cmdline: 'sim.echo_port=70000' })
  })

  it('takes the MTU its network-config gives, and ignores a bad sim.echo_port with a warning', async () => {
    assert.match(await bootLog(second.vmm), /eth0: 10\.77\.0\.12\/24 up, mtu 1400\n/)
    assert.match(await readFile(second.vmm.paths.log, 'utf8'), /ignoring unknown or malformed directive "sim.echo_port=70000"/)
    assert.equal(await tcpEcho(network.netns, second.address, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok', 'the valid one stands')
  })

  it('pings and connects to its peer from its console, and prints what came of it', async () => {
    const consoleSocket = first.vmm.paths.console
    assert.match(await guestProbe(consoleSocket, `ping ${second.address}`), new RegExp(`^sim\\.ping ${second.address}: 3/3 replies, longest gap \\d+ ms$`))
    assert.equal(await guestProbe(consoleSocket, `connect ${second.address} ${ECHO_PORT}`), `sim.connect ${second.address}:${ECHO_PORT}: echo ok`)
    assert.equal(await guestProbe(consoleSocket, `connect ${second.address} 9`), `sim.connect ${second.address}:9: refused`)
    assert.match(await guestProbe(second.vmm.paths.console, `ping ${first.address} 2`), new RegExp(`^sim\\.ping ${first.address}: 2/2 replies, longest gap \\d+ ms$`))
  })

  it("measures a peer's blackout as the longest gap between replies to pings sent at a steady pace", async () => {
    const probing = guestProbe(first.vmm.paths.console, `ping ${second.address} 60 25`, { timeoutMs: 10_000 })
    await new Promise((resolve) => setTimeout(resolve, 400))
    assert.equal((await second.vmm.callJson('PUT', 'vm.pause')).status, 204)
    const pausedAt = Date.now()
    await new Promise((resolve) => setTimeout(resolve, 500))
    assert.equal((await second.vmm.callJson('PUT', 'vm.resume')).status, 204)
    const paused = Date.now() - pausedAt
    const line = await probing
    const [, received, gap] = /^sim\.ping [\d.]+: (\d+)\/60 replies, longest gap (\d+) ms$/.exec(line) ?? []
    assert.ok(gap !== undefined, line)
    // A paused VM reads nothing from its TAP: the requests wait in the kernel's queue and are answered once it resumes.
    assert.ok(Number(received) > 30, line)
    assert.ok(Number(gap) >= paused - 50 && Number(gap) <= paused + 200, `a pause of ${paused} ms: ${line}`)
  })

  it('reaches off its subnet through its default route, and reports what does not answer', async () => {
    const consoleSocket = first.vmm.paths.console
    assert.match(await guestProbe(consoleSocket, `ping ${OFF_SUBNET} 1`), new RegExp(`^sim\\.ping ${OFF_SUBNET}: 1/1 replies, longest gap \\d+ ms$`))
    assert.equal(await guestProbe(consoleSocket, 'connect 10.77.0.98 7'), 'sim.connect 10.77.0.98:7: timed out', 'ARP gets no answer in 2 s')
    assert.equal(await guestProbe(consoleSocket, 'ping 10.77.0.99 1'), 'sim.ping 10.77.0.99: 0/1 replies, longest gap 0 ms', 'one request: nothing to wait between')
    assert.equal(await guestProbe(consoleSocket, 'connect 10.77.0.99 7'), 'sim.connect 10.77.0.99:7: no route to host', 'ARP has failed for it')
    assert.equal(await guestProbe(consoleSocket, 'ping nowhere'), 'sim: unknown command: ping nowhere')
  })

  it('runs commands in the order typed, each printing its line and then the prompt; other lines are login names as ever', async () => {
    const socket = connect(first.vmm.paths.console)
    let output = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    try {
      await once(socket, 'connect')
      socket.write(`ping ${second.address} 2\rconnect ${second.address} ${ECHO_PORT}\rroot\r`)
      const expected = new RegExp(`ping ${second.address} 2\r\nconnect ${second.address} ${ECHO_PORT}\r\nroot\r\nb login: ` +
        `sim\\.ping ${second.address}: 2/2 replies, longest gap \\d+ ms\nb login: sim\\.connect ${second.address}:${ECHO_PORT}: echo ok\nb login: $`)
      await waitFor('both results', async () => expected.test(output) ? true : null, { timeoutMs: 5000, intervalMs: 20, detail: () => JSON.stringify(output) })
    } finally {
      socket.destroy()
    }
  })
})

describe('a multi-queue TAP', () => {
  it('serves every queue: the host\'s flows, which the kernel spreads over them, are all answered', async () => {
    const guest = await bootGuest('d', '10.77.0.13', { queuePairs: 2 })
    assert.match(await bootLog(guest.vmm), /eth0: [0-9a-f:]+, 2 queue pair\(s\), host TAP vmpnetd\n/)
    assert.deepEqual(await ping(network.netns, guest.address), { sent: 3, received: 3 })
    for (let i = 0; i < 6; i++) {
      assert.equal(await tcpEcho(network.netns, guest.address, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok', `connection ${i}`)
    }
  })
})
