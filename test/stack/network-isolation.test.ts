/**
 * Networks that isolate (docs/design.md §19), with real packets on a dev stack of three hosts:
 * two networks, a guest of each on every host (moved there by live migration where placement put
 * it elsewhere), every guest told at its console to ping each other guest and to open a TCP
 * connection to its echo service. Every pair on one network answers, whichever hosts the two run
 * on (across hosts through the network's VXLAN segment); no pair across the networks does. The
 * matrix is printed.
 *
 * A guest keeps being reached through its live migrations: another guest of its network pings it
 * every 20 ms while it moves between two hosts ten times; the longest gap between replies (the
 * blackout, to within 20 ms) of each is printed, and none is more than a second. The forwarding
 * follows the VM by itself: the target announces its NIC (RARP) when it resumes.
 *
 * The outside, a station on the stack's LAN (test/helpers/outside-station.ts): a guest of a network
 * with `outbound: nat` reaches it (ping, TCP), through its host's NAT; a guest of one without does
 * not; and the station, routing each guest's network to the guest's host, reaches neither.
 *
 * An agent SIGKILLed and restarted finds its host's segments, TAPs and firewall tables exactly as
 * they were, and its guests still reach each other; an agent killed just after making a segment
 * for a migration's target (before its TAP) leaves no part of it once it is back and the
 * reconciler has passed, and the stack's invariants hold, segments counted.
 *
 * Every probe runs inside a simulated guest (gVisor's netstack on its TAP) or a namespace of the
 * stack's: nothing is sent from the machine's own namespace.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { segmentBridgeOf, segmentVxlanOf } from '../../domain/network-segments.js'
import { runCommand } from '../../host-agent/process/command.js'
import { waitFor } from '../../stack/wait.js'
import { armCrashPlan, crashPlanFired } from '../helpers/crash-plans.js'
import { GuestConsole } from '../helpers/guest-console.js'
import { checkInvariants } from '../helpers/invariants.js'
import { ping, tcpEcho } from '../helpers/net-probe.js'
import { OutsideStation } from '../helpers/outside-station.js'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { RECONCILE_ON_DEMAND_ONLY, lastReconcilePass, nextReconcilePass } from '../helpers/operator.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const ECHO_PORT = 7
const NETWORKS = [{ name: 'blue', cidr: '10.61.0.0/24' }, { name: 'green', cidr: '10.62.0.0/24' }]
/** A network with a way out: its guests reach the LAN through their host's NAT. */
const OPEN = { name: 'open', cidr: '10.63.0.0/24', outbound: 'nat' }

interface Guest {
  name: string
  network: string
  host: string
  id: string
  ip: string
}

describe('networks that isolate', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  const guests: Guest[] = []

  before(async () => {
    stack = await startStack({ hosts: 3, env: { VMPLANE_CRASH_POINTS: '1', VMPLANE_RECONCILE_SECONDS: RECONCILE_ON_DEMAND_ONLY } })
    for (const network of [...NETWORKS, OPEN]) assert.equal((await api(stack).post('/v1/networks', network)).status, 201)
    const hosts = stack.info.hosts.map((host) => host.id)
    for (const network of NETWORKS) {
      for (const host of hosts) guests.push(await guestOn(network.name, host, `${network.name}-${host}`))
    }
  })
  after(async () => { await stack?.stop() })

  /** A running guest of the network on the host, with the echo service on. */
  async function guestOn (network: string, host: string, name: string): Promise<Guest> {
    const created = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', {
      ...newInstance(name, `console=ttyS0 sim.echo_port=${ECHO_PORT}`),
      interfaces: [{ network }]
    })
    assert.equal(created.status, 202, JSON.stringify(created.body))
    let instance = await waitForState(stack, created.body.instance.id, 'running')
    if (instance.vmm?.hostId !== host) {
      const moved = await api(stack).post(`/v1/instances/${instance.id}/migrate?wait=60`, { targetHostId: host })
      assert.equal(moved.status, 200, JSON.stringify(moved.body))
      instance = await waitForState(stack, instance.id, 'running')
    }
    assert.equal(instance.vmm?.hostId, host)
    const { body } = await api(stack).get<{ interfaces: Array<{ ip: string }> }>(`/v1/instances/${instance.id}`)
    return { name, network, host, id: instance.id, ip: body.interfaces[0]!.ip }
  }

  it('every pair on one network reaches each other (ping and TCP), across hosts; no pair across networks does', async () => {
    const results = await Promise.all(guests.map(async (from) => {
      const shell = await GuestConsole.open(stack, from.id)
      try {
        const row: Array<{ to: Guest, ping: number, tcp: string }> = []
        for (const to of guests.filter((other) => other !== from)) {
          row.push({ to, ping: (await shell.ping(to.ip, 2)).received, tcp: await shell.connect(to.ip, ECHO_PORT) })
        }
        return { from, row }
      } finally {
        shell.close()
      }
    }))

    const cell = (ping: number, tcp: string): string => `${ping}/2 ${tcp === 'echo ok' ? 'tcp' : '---'}`
    const lines = [['from \\ to', ...guests.map((g) => g.name)].join(' | ')]
    for (const { from, row } of results) {
      lines.push([from.name, ...guests.map((to) => to === from ? '' : cell(row.find((r) => r.to === to)!.ping, row.find((r) => r.to === to)!.tcp))].join(' | '))
    }
    console.log(`reachability (ping replies of 2, TCP echo on port ${ECHO_PORT}):\n${lines.join('\n')}`)

    const same = results.flatMap(({ from, row }) => row.filter((r) => r.to.network === from.network).map((r) => ({ from, ...r })))
    const across = results.flatMap(({ from, row }) => row.filter((r) => r.to.network !== from.network).map((r) => ({ from, ...r })))
    assert.equal(same.length, 12)
    assert.equal(across.length, 18)
    const unreached = same.filter((r) => r.ping !== 2 || r.tcp !== 'echo ok')
    assert.deepEqual(unreached.map((r) => `${r.from.name} → ${r.to.name}: ${cell(r.ping, r.tcp)}`), [], 'every same-network pair')
    const crossed = across.filter((r) => r.ping !== 0 || r.tcp === 'echo ok')
    assert.deepEqual(crossed.map((r) => `${r.from.name} → ${r.to.name}: ${cell(r.ping, r.tcp)}`), [], 'no cross-network pair')
  })

  it('keeps a guest reachable through ten live migrations, each blackout under a second', async () => {
    const [prober, moving] = guests.filter((guest) => guest.network === 'blue')
    const homes = stack.info.hosts.map((host) => host.id).filter((host) => host !== prober!.host)
    const shell = await GuestConsole.open(stack, prober!.id)
    const blackouts: number[] = []
    let at = moving!.host
    try {
      for (let i = 0; i < 10; i++) {
        const target = homes.find((host) => host !== at)!
        // 300 pings 20 ms apart: 6 s, which a migration of the simulator's VM (a second or two) sits inside.
        const pinging = shell.ping(moving!.ip, 300, 20)
        await new Promise((resolve) => setTimeout(resolve, 1000))
        const moved = await api(stack).post(`/v1/instances/${moving!.id}/migrate?wait=60`, { targetHostId: target })
        assert.equal(moved.status, 200, JSON.stringify(moved.body))
        const { sent, received, longestGapMs } = await pinging
        blackouts.push(longestGapMs)
        assert.ok(received > 0 && sent === 300, `migration ${i + 1} to ${target}: ${received}/${sent}`)
        at = (await api(stack).get<InstanceBody>(`/v1/instances/${moving!.id}`)).body.vmm!.hostId
        assert.equal(at, target)
      }
    } finally {
      shell.close()
    }
    const sorted = [...blackouts].sort((a, b) => a - b)
    console.log(`blackouts of 10 live migrations (longest gap between replies to pings every 20 ms): ${blackouts.join(', ')} ms; median ${sorted[4]} ms, max ${sorted[9]} ms`)
    assert.ok(sorted[9]! <= 1000, `every blackout at most a second: ${blackouts.join(', ')} ms`)
  })

  it("reaches the LAN through its host's NAT only on a network with a way out; nothing on the LAN reaches a guest", async () => {
    const host = stack.info.hosts[0]!
    const hostAddress = new URL(host.url).hostname
    const station = await OutsideStation.start(stack.info.lan, ECHO_PORT)
    try {
      const open = await guestOn(OPEN.name, host.id, `open-${host.id}`)
      const closed = guests.find((guest) => guest.network === 'blue' && guest.host === host.id)!
      const outward = async (guest: Guest): Promise<{ ping: number, tcp: string }> => {
        const shell = await GuestConsole.open(stack, guest.id)
        try {
          return { ping: (await shell.ping(station.address, 3)).received, tcp: await shell.connect(station.address, ECHO_PORT) }
        } finally {
          shell.close()
        }
      }
      assert.deepEqual(await outward(open), { ping: 3, tcp: 'echo ok' }, 'a guest with a way out')
      // The station logs each connection on its standard output, which may reach the test a moment after the echo reached the guest.
      await waitFor('the station to log the connection', async () => station.connectionsFrom.length > 0 ? true : null, { timeoutMs: 5_000, intervalMs: 20 })
      assert.deepEqual(station.connectionsFrom, [hostAddress], "seen from its host's address: NAT")
      const shut = await outward(closed)
      assert.equal(shut.ping, 0, 'a guest without a way out')
      assert.notEqual(shut.tcp, 'echo ok')

      await station.route(OPEN.cidr, hostAddress)
      await station.route(NETWORKS[0]!.cidr, hostAddress)
      for (const guest of [open, closed]) {
        assert.equal((await ping(station.netns, guest.ip, { count: 3 })).received, 0, `the LAN pings ${guest.name}`)
        assert.notEqual(await tcpEcho(station.netns, guest.ip, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok', `the LAN connects to ${guest.name}`)
      }
    } finally {
      await station.stop()
    }
  })

  it("keeps a host's devices and rules through its agent's SIGKILL, and leaves no part of a segment made by an agent killed before its TAP", async () => {
    const host = stack.info.hosts[0]!
    const before = await networkStateOf(host.netns)
    assert.ok(before.includes('table inet vmplane'), before)
    await stack.kill(`agent-${host.id}`)
    await stack.waitForRestart(`agent-${host.id}`)
    await waitFor(`agent-${host.id} back`, async () => (await fetch(`${host.url}/healthz`).then((r) => r.ok, () => false)) ? true : null, { timeoutMs: 30_000 })
    assert.equal(await networkStateOf(host.netns), before, 'nothing missing, nothing left over')
    const [here, there] = guests.filter((guest) => guest.network === 'blue')
    const shell = await GuestConsole.open(stack, here!.id)
    try {
      assert.equal((await shell.ping(there!.ip, 2)).received, 2)
    } finally {
      shell.close()
    }

    // A migration's target, killed once it has made the network's segment there and before the TAP.
    const late = { name: 'late', cidr: '10.64.0.0/24' }
    assert.equal((await api(stack).post('/v1/networks', late)).status, 201)
    const { vni } = (await api(stack).get<{ vni: number }>(`/v1/networks/${late.name}`)).body
    const moving = await guestOn(late.name, host.id, 'late-mover')
    const target = stack.info.hosts[1]!
    await armCrashPlan(stack, { point: 'agent.segment.after-create', kill: `agent-${target.id}`, host: target.id })
    const migrating = api(stack).post(`/v1/instances/${moving.id}/migrate?wait=60`, { targetHostId: target.id })
    await crashPlanFired(stack, 'the target agent killed after making the segment')
    await migrating
    await waitForState(stack, moving.id, 'running')
    const previous = (await lastReconcilePass(stack))?.id ?? null
    assert.equal((await api(stack).post('/v1/admin/reconcile')).status, 202)
    await nextReconcilePass(stack, previous)
    const { body } = await api(stack).get<InstanceBody>(`/v1/instances/${moving.id}`)
    const links = await linkNamesOf(target.netns)
    if (body.vmm!.hostId === target.id) {
      assert.ok(links.includes(segmentVxlanOf(vni)), 'the migration went on: its segment whole on the target')
    } else {
      assert.ok(!links.includes(segmentBridgeOf(vni)) && !links.includes(segmentVxlanOf(vni)), `no part of the segment left on ${target.id}: ${links.join(' ')}`)
    }
    const report = await checkInvariants(stack.info)
    assert.deepEqual([...report.orphanSegments, ...report.firewallDrift, ...report.orphanTaps, ...report.notAtIntent], [])
  })
})

/** A host's vmplane links (name, bridge, state) and its firewall tables, as text to compare. */
async function networkStateOf (netns: string): Promise<string> {
  const links = JSON.parse(await runCommand('ip', ['-n', netns, '-json', 'link', 'show'])) as Array<{ ifname: string, master?: string, operstate: string }>
  const ours = links.filter((link) => link.ifname.startsWith('vmp')).map((link) => `${link.ifname} ${link.master ?? '-'} ${link.operstate}`).sort()
  const tables = await runCommand('ip', ['netns', 'exec', netns, 'nft', 'list', 'tables'])
  const rules = []
  for (const family of ['inet', 'bridge']) rules.push(await runCommand('ip', ['netns', 'exec', netns, 'nft', 'list', 'table', family, 'vmplane']))
  return [...ours, tables, ...rules].join('\n')
}

async function linkNamesOf (netns: string): Promise<string[]> {
  return (JSON.parse(await runCommand('ip', ['-n', netns, '-json', 'link', 'show'])) as Array<{ ifname: string }>).map((link) => link.ifname)
}
