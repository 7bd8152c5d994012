/**
 * The agent's network segments (host-agent/network/segments.ts) in a network namespace of the
 * test's own, with the real iproute2: a network's first TAP makes its bridge and VXLAN device,
 * named after its VNI, with the network's gateway (a veth with its address and MAC, one end on the bridge, which keeps a MAC of its own and
 * routes the network's range); later TAPs of the network share them; a segment with no TAP is pruned and
 * one with a TAP never is; a segment half made (a crash between its devices) is completed or,
 * unused, removed whole; nobody else's devices are touched.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { GUEST_MTU, gatewayMacOf, segmentBridgeOf, segmentGatewayOf, segmentGatewayPortOf, segmentGroupOf, segmentVxlanOf } from '../../domain/network-segments.js'
import { IpCommands } from '../../host-agent/network/ip-commands.js'
import { NetworkSegments } from '../../host-agent/network/segments.js'
import { TapDevices } from '../../host-agent/network/taps.js'
import { createHostNetwork, HOST_UPLINK, type HostNetwork } from '../../stack/host-network.js'

interface VxlanLink {
  ifname: string
  mtu: number
  master?: string
  flags: string[]
  linkinfo: { info_kind: string, info_data: { id: number, group: string, link?: string, port: number } }
}

describe('network segments', () => {
  let network: HostNetwork
  let segments: NetworkSegments
  let taps: TapDevices
  let ip: IpCommands
  before(async () => {
    network = await createHostNetwork('seg')
    segments = new NetworkSegments(network.netns, HOST_UPLINK)
    taps = new TapDevices(network.netns)
    ip = new IpCommands(network.netns)
  })
  after(async () => { await network?.remove() })

  const attachTap = async (vni: number, tap: string): Promise<void> => {
    await segments.attach(vni, `10.${vni - 4000}.0.1/24`, async (bridge) => { await taps.ensure(tap, false, bridge) })
  }
  const names = async (): Promise<string[]> => (await ip.links(['show'])).map((link) => link.ifname).sort()

  it('prepares its underlay device at start-up: refuses a missing one, and lets the host join a multicast group per segment', async () => {
    await segments.prepareUnderlay()
    assert.equal((await ip.exec('sysctl', ['-n', 'net.ipv4.igmp_max_memberships'])).trim(), '4096')
    await assert.rejects(new NetworkSegments(network.netns, 'nolan0').prepareUnderlay(), /no device nolan0 in network namespace vmp-seg-/)
  })

  it("makes a network's segment with its first TAP, named after its VNI, and shares it with the next", async () => {
    await attachTap(4096, 'vmp000000000a01')
    await attachTap(4096, 'vmp000000000a02')
    const [vxlan] = await ip.links(['show', 'dev', segmentVxlanOf(4096)]) as unknown as VxlanLink[]
    assert.equal(vxlan?.master, segmentBridgeOf(4096))
    assert.equal(vxlan?.mtu, GUEST_MTU)
    assert.ok(vxlan?.flags.includes('UP'))
    assert.equal(vxlan?.linkinfo.info_data.id, 4096)
    assert.equal(vxlan?.linkinfo.info_data.group, segmentGroupOf(4096))
    assert.deepEqual(await segments.list(), [{ vni: 4096, bridge: 'vmpn001000', joined: true, taps: ['vmp000000000a01', 'vmp000000000a02'], routed: false }])
    const [tap] = await ip.links(['show', 'dev', 'vmp000000000a01'])
    assert.equal(tap?.mtu, GUEST_MTU)
    const [gateway] = JSON.parse(await ip.run(['-json', 'addr', 'show', 'dev', segmentGatewayOf(4096)])) as Array<{ address: string, link: string, addr_info: Array<{ local: string, prefixlen: number }> }>
    assert.equal(gateway?.address, gatewayMacOf(4096), "the gateway's MAC, the same on every host")
    assert.deepEqual(gateway?.addr_info.map((a) => `${a.local}/${a.prefixlen}`), ['10.96.0.1/32'], "the network's gateway")
    const [bridge] = JSON.parse(await ip.run(['-json', 'addr', 'show', 'dev', segmentBridgeOf(4096)])) as Array<{ address: string, addr_info: unknown[] }>
    assert.notEqual(bridge?.address, gatewayMacOf(4096), 'the bridge keeps a MAC of its own, which what the host routes onto the segment leaves with')
    assert.deepEqual(bridge?.addr_info, [])
    assert.match(await ip.run(['route', 'show', '10.96.0.0/24']), new RegExp(`dev ${segmentBridgeOf(4096)}`))
    const [port] = await ip.links(['show', 'dev', segmentGatewayPortOf(4096)])
    assert.equal(port?.master, segmentBridgeOf(4096), "the gateway's other end is a port of the bridge")
    const sysctl = async (name: string): Promise<string> => (await ip.exec('sysctl', ['-n', name])).trim()
    assert.equal(await sysctl(`net.ipv4.conf.${segmentBridgeOf(4096)}.arp_ignore`), '1', 'the bridge answers no ARP for the gateway')
    assert.equal(await sysctl(`net.ipv4.conf.${segmentBridgeOf(4096)}.arp_announce`), '2')
  })

  it('keeps each network on its own bridge and VNI', async () => {
    await attachTap(4097, 'vmp000000000b01')
    const listed = await segments.list()
    assert.deepEqual(listed.map((segment) => [segment.vni, segment.taps]), [[4096, ['vmp000000000a01', 'vmp000000000a02']], [4097, ['vmp000000000b01']]])
  })

  it('prunes a segment once its last TAP is gone, and never one with a TAP', async () => {
    await taps.remove('vmp000000000a01')
    assert.deepEqual(await segments.prune([4096]), [])
    await taps.remove('vmp000000000a02')
    assert.equal(await segments.removeIfUnused(4097), false, 'a segment with a TAP stays')
    assert.deepEqual(await segments.prune(), [4096])
    assert.ok(!(await names()).includes('vmpn001000'))
    assert.ok(!(await names()).includes('vmpx001000'))
    assert.ok(!(await names()).some((name) => name === 'vmpg001000' || name === 'vmpq001000'), 'the gateway goes with it')
  })

  it('completes a segment half made, and removes one half made that no TAP uses', async () => {
    await ip.run(['link', 'add', segmentBridgeOf(4098), 'type', 'bridge'])
    await attachTap(4098, 'vmp000000000c01')
    assert.deepEqual((await segments.list()).find((segment) => segment.vni === 4098), { vni: 4098, bridge: 'vmpn001002', joined: true, taps: ['vmp000000000c01'], routed: false })

    await ip.run(['link', 'add', segmentVxlanOf(4099), 'type', 'vxlan', 'id', '4099', 'dstport', '4789', 'dev', HOST_UPLINK])
    assert.deepEqual((await segments.list()).find((segment) => segment.vni === 4099), { vni: 4099, bridge: 'vmpn001003', joined: false, taps: [], routed: false })
    assert.deepEqual(await segments.prune(), [4099])
    assert.ok(!(await names()).includes('vmpx001003'))
  })

  it('holds the segments of more networks than the kernel lets one socket join multicast groups by default (20)', async () => {
    const vnis = Array.from({ length: 24 }, (_, i) => 4200 + i)
    for (const vni of vnis) await attachTap(vni, `vmp0000000${vni.toString(16).padStart(5, '0')}`)
    const listed = await segments.list()
    assert.deepEqual(vnis.filter((vni) => listed.find((segment) => segment.vni === vni)?.joined !== true), [], 'every segment whole, its VXLAN device UP')
    for (const vni of vnis) await taps.remove(`vmp0000000${vni.toString(16).padStart(5, '0')}`)
    assert.deepEqual(await segments.prune(vnis), vnis)
  })

  it("leaves devices that are not a segment's alone", async () => {
    await ip.run(['link', 'add', 'vmpnot-mine', 'type', 'bridge'])
    await segments.prune()
    assert.ok((await names()).includes('vmpnot-mine'))
  })
})
