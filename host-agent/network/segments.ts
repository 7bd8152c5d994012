/**
 * The host's network segments (docs/design.md §19): for each network with an interface here, a
 * bridge its TAPs are attached to and a VXLAN device on that bridge that carries its frames to and
 * from the same network's bridges on other hosts, over the host's underlay device (its LAN port).
 *
 * Theory of operation. A segment is named after its network's VNI (domain/network-segments.ts),
 * so it is made if missing and found if there, by a retry, a restarted agent or a second VMM of
 * the network. It exists while a TAP is attached to its bridge: `attach` makes it and runs the
 * TAP's attachment while holding the segment's lock, and `prune` removes a segment whose bridge
 * has no TAP left under the same lock, so a segment is never removed between being made and
 * having its TAP. What a crash left (a segment made, its TAP never attached, or its last TAP
 * removed and the agent gone before pruning) is pruned at the agent's start, after each VMM's
 * release and by the reconciler's sweep (`GET/DELETE /v1/segments`).
 *
 * The VXLAN device learns where each MAC is from the frames it receives, and floods the rest to
 * the segment's multicast group, which only hosts with the segment join: so no forwarding entry is
 * ever written by hand, and none outlives its device. A VM that moves is found at once: Cloud
 * Hypervisor announces each NIC with a RARP broadcast when a migration's target resumes, which
 * every host of the network learns the MAC's new place from.
 *
 * The network's gateway on each host is a veth pair (domain/network-segments.ts): one end a port
 * of the bridge, the other the host's, with the gateway's address (a /32) and its MAC, the same
 * on every host (`gatewayMacOf`), so a guest that moves finds its gateway where it was. The
 * bridge keeps a MAC of its own and no address; the network's range is routed through it. So:
 *
 * - what a guest sends to be routed crosses the bridge to the gateway's port like any frame
 *   between two ports, where the host's firewall sees it as bridged, and enters the host's IP
 *   layer on the gateway's end afresh (a veth hands its peer a packet without its connection
 *   tracking), where it is routed, translated (NAT) and seen again;
 * - what the host routes onto the segment leaves through the bridge, with the bridge's MAC, not
 *   the gateway's: hosts that route between two linked networks (network/host-firewall.ts) reach
 *   the other network's guests on other hosts over its VXLAN device, and the guests' hosts take
 *   the replies for the bridge's, not for their own gateway;
 * - the bridge answers no ARP for the host's addresses (`arp_ignore`) and asks for guests from
 *   the host's own address (`arp_announce`), so a guest learns the gateway's MAC and no other for
 *   the gateway's address.
 *
 * A segment is almost always there already when a VMM boots (a network's first VMM on a host
 * makes it; the others find it), so it is looked at first, by one run of ip, and a whole one is
 * left as it is. Otherwise what is missing is made by one run of ip (its batch mode), each
 * device with the guests' MTU and down; the bridge's and gateway's ARP settings are set; and one
 * more run attaches them, brings them UP and gives the gateway its address and the network its
 * route. A segment is whole only once UP, so a crash before then is repaired at the next attach.
 *
 * A host also joins the segments of networks its guests' policies route to (`joinRoutes`): the
 * same devices, without a TAP, kept while a live VMM's policy names them.
 */
import { randomBytes } from 'node:crypto'
import type { VmmPolicy } from '../../domain/host-agent-api.js'
import { networkOf } from '../../domain/ipv4.js'
import {
  GUEST_MTU, UNDERLAY_MTU, VXLAN_PORT, gatewayMacOf, segmentBridgeOf, segmentGatewayOf, segmentGatewayPortOf, segmentGroupOf,
  segmentVxlanOf, vniOfSegmentDevice
} from '../../domain/network-segments.js'
import { crashPoint } from '../../faults/crash-points.js'
import { OneAtATime } from './one-at-a-time.js'
import { IpCommands, type IpLink } from './ip-commands.js'

/** The segments a host may have, one multicast group each (`prepareUnderlay`). */
const MAX_SEGMENTS = 4096

export interface Segment {
  vni: number
  bridge: string
  /** Whether its VXLAN device exists and is on its bridge. */
  joined: boolean
  /** The TAPs on its bridge. */
  taps: string[]
  /** Whether a live VMM's policy routes to its network (`joinRoutes`). */
  routed: boolean
}

export class NetworkSegments {
  readonly #ip: IpCommands
  /** Making, attaching to and pruning one network's segment never interleave. */
  readonly #oneAtATime = new OneAtATime<number>()

  /** `routes` says which networks the host's live VMMs' policies route to: their segments stay, TAPs or not. */
  constructor (readonly netns: string | null, readonly underlay: string, private readonly routes: () => VmmPolicy['routes'] = () => []) {
    this.#ip = new IpCommands(netns)
  }

  /**
   * Checks the underlay device exists and carries VXLAN whole, and lets the host join a multicast
   * group for each of its segments (at start-up, so a mistake shows at once). Every VXLAN device
   * on the port shares one socket, and the kernel lets a socket join 20 groups by default
   * (`igmp_max_memberships`): a host would take no 21st network.
   */
  async prepareUnderlay (): Promise<void> {
    const [link] = await this.#ip.links(['show', 'dev', this.underlay]).catch(() => [])
    const where = this.#ip.where()
    if (link === undefined) throw new Error(`no device ${this.underlay} in ${where} to carry networks' VXLAN (VMPLANE_AGENT_UNDERLAY)`)
    if ((link.mtu ?? 0) < UNDERLAY_MTU) {
      throw new Error(`${this.underlay} in ${where} has MTU ${link.mtu ?? '?'}: guests' frames of ${GUEST_MTU} bytes need ${UNDERLAY_MTU} once VXLAN wraps them`)
    }
    await this.#ip.exec('sysctl', ['-qw', `net.ipv4.igmp_max_memberships=${MAX_SEGMENTS}`])
  }

  /**
   * Makes the network's segment if it is missing, with `gateway` (its address and prefix length,
   * `10.0.0.1/24`) on its bridge, and runs `change` (a TAP's attachment to `bridge`) under its lock.
   */
  async attach<T> (vni: number, gateway: string, change: (bridge: string) => Promise<T>): Promise<T> {
    return await this.#oneAtATime.run(vni, async () => {
      await this.#ensure(vni, gateway)
      return await change(segmentBridgeOf(vni))
    })
  }

  /**
   * Joins the segment of every network the live VMMs' policies route to (each network once,
   * however many VMMs route to it); none of the host's links is listed when none does, and they
   * are listed once when some do, those whole left alone.
   */
  async joinRoutes (): Promise<void> {
    const routes = new Map(this.routes().map((route) => [route.vni, route.gateway]))
    if (routes.size === 0) return
    const links = await this.#ip.links(['show'])
    for (const [vni, gateway] of routes) {
      if (!isWhole(links, vni)) await this.attach(vni, gateway, async () => {})
    }
  }

  /**
   * Removes each of the segments (all of the host's by default) that no TAP is attached to and no
   * route wants; returns their VNIs. The host's links are listed once to find them, and each is
   * looked at again under its lock before it goes.
   */
  async prune (vnis?: readonly number[]): Promise<number[]> {
    const unused = (await this.list()).filter((segment) => (vnis === undefined || vnis.includes(segment.vni)) && segment.taps.length === 0 && !segment.routed)
    const pruned: number[] = []
    for (const { vni } of unused) {
      if (await this.removeIfUnused(vni)) pruned.push(vni)
    }
    return pruned
  }

  /** Removes the segment if no TAP is attached to it and no route wants it, once no other change of it is in flight; false when it was not removed. */
  async removeIfUnused (vni: number): Promise<boolean> {
    return await this.#oneAtATime.run(vni, async () => await this.#removeIfUnused(vni))
  }

  /** Every segment on the host, whole or part made (a VXLAN device without its bridge counts too). */
  async list (): Promise<Segment[]> {
    return segmentsIn(await this.#ip.links(['show']), this.#routedVnis())
  }

  #routedVnis (): Set<number> {
    return new Set(this.routes().map((route) => route.vni))
  }

  /** The segment whole (or made whole): its bridge, its VXLAN device and gateway port on it, the gateway with its address, all UP. */
  async #ensure (vni: number, gateway: string): Promise<void> {
    const bridge = segmentBridgeOf(vni)
    const vxlan = segmentVxlanOf(vni)
    const gatewayEnd = segmentGatewayOf(vni)
    const gatewayPort = segmentGatewayPortOf(vni)
    const links = await this.#ip.links(['show'])
    if (isWhole(links, vni)) return
    const found = (name: string): IpLink | undefined => links.find((link) => link.ifname === name)
    // No IPv6 on any: the gateway's link-local address would be the same on every host of the segment.
    const v4Only = (name: string): string[] => ['link', 'set', name, 'addrgenmode', 'none']
    const made = found(bridge) === undefined
    await this.#ip.batch([
      ...made ? [['link', 'add', bridge, 'address', bridgeMac(), 'mtu', String(GUEST_MTU), 'type', 'bridge'], v4Only(bridge)] : [],
      ...found(vxlan) !== undefined
        ? []
        : [['link', 'add', vxlan, 'mtu', String(GUEST_MTU), 'type', 'vxlan', 'id', String(vni), 'group', segmentGroupOf(vni),
            'dev', this.underlay, 'dstport', String(VXLAN_PORT), 'ttl', '1'], v4Only(vxlan)],
      // A veth's two ends come and go together.
      ...found(gatewayEnd) !== undefined
        ? []
        : [['link', 'add', gatewayEnd, 'address', gatewayMacOf(vni), 'mtu', String(GUEST_MTU), 'type', 'veth',
            'peer', 'name', gatewayPort, 'mtu', String(GUEST_MTU)], v4Only(gatewayEnd), v4Only(gatewayPort)]
    ])
    await this.#ip.exec('sysctl', ['-qw', `net.ipv4.conf.${bridge}.arp_ignore=1`, `net.ipv4.conf.${bridge}.arp_announce=2`,
      `net.ipv4.conf.${gatewayEnd}.arp_ignore=1`])
    await this.#ip.batch([
      ['link', 'set', vxlan, 'master', bridge, 'up'],
      ['link', 'set', gatewayPort, 'master', bridge, 'up'],
      ['link', 'set', bridge, 'up'],
      ['link', 'set', gatewayEnd, 'up'],
      ['addr', 'replace', `${gateway.split('/')[0]!}/32`, 'dev', gatewayEnd],
      ['route', 'replace', networkOf(gateway), 'dev', bridge]
    ])
    if (made) crashPoint('agent.segment.after-create')
  }

  async #removeIfUnused (vni: number): Promise<boolean> {
    const links = await this.#ip.links(['show'])
    const segment = segmentsIn(links, this.#routedVnis()).find((found) => found.vni === vni)
    if (segment === undefined || segment.taps.length > 0 || segment.routed) return false
    // The gateway's end takes its port with it.
    const existing = [segmentGatewayOf(vni), segmentVxlanOf(vni), segmentBridgeOf(vni)].filter((name) => links.some((link) => link.ifname === name))
    await this.#ip.batch(existing.map((name) => ['link', 'del', 'dev', name]))
    return true
  }
}

/**
 * A MAC for a new bridge, locally administered and random, so no two hosts' bridges of a
 * network share one. Set, not left to the kernel, which would give the bridge the lowest of its
 * ports' MACs and change it as ports come and go.
 */
function bridgeMac (): string {
  const bytes = randomBytes(6)
  bytes[0] = 0x02
  return [...bytes].map((byte) => byte.toString(16).padStart(2, '0')).join(':')
}

/** Whether the segment is whole among the host's links: its VXLAN device and gateway port on its bridge, all UP. */
function isWhole (links: IpLink[], vni: number): boolean {
  const bridge = segmentBridgeOf(vni)
  const up = (name: string): IpLink | undefined => links.find((link) => link.ifname === name && (link.flags?.includes('UP') ?? false))
  return up(segmentVxlanOf(vni))?.master === bridge && up(segmentGatewayPortOf(vni))?.master === bridge &&
    up(segmentGatewayOf(vni)) !== undefined && up(bridge) !== undefined
}

/** The segments among the host's links. */
function segmentsIn (links: IpLink[], routed: ReadonlySet<number>): Segment[] {
  const vnis = new Set(links.map((link) => vniOfSegmentDevice(link.ifname)).filter((vni): vni is number => vni !== null))
  return [...vnis].sort((a, b) => a - b).map((vni) => {
    const bridge = segmentBridgeOf(vni)
    return {
      vni,
      bridge,
      joined: links.some((link) => link.ifname === segmentVxlanOf(vni) && link.master === bridge),
      taps: links.filter((link) => link.master === bridge && link.linkinfo?.info_kind === 'tun').map((link) => link.ifname),
      routed: routed.has(vni)
    }
  })
}
