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
 * Every probe runs inside a simulated guest (gVisor's netstack on its TAP): nothing is sent from
 * the machine's own namespace.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { GuestConsole } from '../helpers/guest-console.js'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const ECHO_PORT = 7
const NETWORKS = [{ name: 'blue', cidr: '10.61.0.0/24' }, { name: 'green', cidr: '10.62.0.0/24' }]

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
    stack = await startStack({ hosts: 3 })
    for (const network of NETWORKS) assert.equal((await api(stack).post('/v1/networks', network)).status, 201)
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
})
