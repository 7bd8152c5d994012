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
 * The bridge carries the network's gateway address, with the same MAC on every host
 * (domain/network-segments.ts `gatewayMacOf`): each host is its guests' gateway, which the host's
 * firewall lets them use only as it allows (network/host-firewall.ts).
 *
 * A segment is almost always there already when a VMM boots (a network's first VMM on a host
 * makes it; the others find it), so it is looked at first, by one run of ip, and a whole one is
 * left as it is. Otherwise what is missing is made, or attached and brought UP again, by one more
 * run of ip (its batch mode): the bridge with the gateway's MAC and address, then the VXLAN
 * device, each with the guests' MTU, the VXLAN device enslaved, both UP.
 */
import {
  GUEST_MTU, UNDERLAY_MTU, VXLAN_PORT, gatewayMacOf, segmentBridgeOf, segmentGroupOf, segmentVxlanOf, vniOfSegmentDevice
} from '../../domain/network-segments.js'
import { crashPoint } from '../../faults/crash-points.js'
import { OneAtATime } from './one-at-a-time.js'
import { IpCommands, type IpLink } from './ip-commands.js'

export interface Segment {
  vni: number
  bridge: string
  /** Whether its VXLAN device exists and is on its bridge. */
  joined: boolean
  /** The TAPs on its bridge. */
  taps: string[]
}

export class NetworkSegments {
  readonly #ip: IpCommands
  /** Making, attaching to and pruning one network's segment never interleave. */
  readonly #oneAtATime = new OneAtATime<number>()

  constructor (readonly netns: string | null, readonly underlay: string) {
    this.#ip = new IpCommands(netns)
  }

  /** Checks the underlay device exists, is UP and carries VXLAN whole (at start-up, so a mistake shows at once). */
  async checkUnderlay (): Promise<void> {
    const [link] = await this.#ip.links(['show', 'dev', this.underlay]).catch(() => [])
    const where = this.#ip.where()
    if (link === undefined) throw new Error(`no device ${this.underlay} in ${where} to carry networks' VXLAN (VMPLANE_AGENT_UNDERLAY)`)
    if ((link.mtu ?? 0) < UNDERLAY_MTU) {
      throw new Error(`${this.underlay} in ${where} has MTU ${link.mtu ?? '?'}: guests' frames of ${GUEST_MTU} bytes need ${UNDERLAY_MTU} once VXLAN wraps them`)
    }
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

  /** Removes each of the segments (all of the host's by default) that no TAP is attached to; returns their VNIs. */
  async prune (vnis?: readonly number[]): Promise<number[]> {
    const pruned: number[] = []
    for (const vni of vnis ?? (await this.list()).map((segment) => segment.vni)) {
      if (await this.removeIfUnused(vni)) pruned.push(vni)
    }
    return pruned
  }

  /** Removes the segment if no TAP is attached to it, once no other change of it is in flight; false when it was not removed. */
  async removeIfUnused (vni: number): Promise<boolean> {
    return await this.#oneAtATime.run(vni, async () => await this.#removeIfUnused(vni))
  }

  /** Every segment on the host, whole or part made (a VXLAN device without its bridge counts too). */
  async list (): Promise<Segment[]> {
    return segmentsIn(await this.#ip.links(['show']))
  }

  /** The segment whole (or made whole): its bridge with its gateway, its VXLAN device on it, both UP. */
  async #ensure (vni: number, gateway: string): Promise<void> {
    const bridge = segmentBridgeOf(vni)
    const vxlan = segmentVxlanOf(vni)
    const links = await this.#ip.links(['show'])
    const found = (name: string): IpLink | undefined => links.find((link) => link.ifname === name)
    const up = (name: string): boolean => found(name)?.flags?.includes('UP') ?? false
    if (found(vxlan)?.master === bridge && up(vxlan) && up(bridge)) return
    // No IPv6 on either: the gateway's link-local address would be the same on every host of the segment.
    const v4Only = (name: string): string[] => ['link', 'set', name, 'addrgenmode', 'none']
    const made = found(bridge) === undefined
    await this.#ip.batch([
      ...made
        ? [['link', 'add', bridge, 'address', gatewayMacOf(vni), 'mtu', String(GUEST_MTU), 'type', 'bridge'], v4Only(bridge)]
        : [['link', 'set', bridge, 'address', gatewayMacOf(vni)]],
      ...found(vxlan) !== undefined
        ? []
        : [['link', 'add', vxlan, 'mtu', String(GUEST_MTU), 'type', 'vxlan', 'id', String(vni), 'group', segmentGroupOf(vni),
            'dev', this.underlay, 'dstport', String(VXLAN_PORT), 'ttl', '1'], v4Only(vxlan)],
      ['link', 'set', vxlan, 'master', bridge, 'up'],
      ['link', 'set', bridge, 'up'],
      ['addr', 'replace', gateway, 'dev', bridge]
    ])
    if (made) crashPoint('agent.segment.after-create')
  }

  async #removeIfUnused (vni: number): Promise<boolean> {
    const links = await this.#ip.links(['show'])
    const segment = segmentsIn(links).find((found) => found.vni === vni)
    if (segment === undefined || segment.taps.length > 0) return false
    const existing = [segmentVxlanOf(vni), segmentBridgeOf(vni)].filter((name) => links.some((link) => link.ifname === name))
    await this.#ip.batch(existing.map((name) => ['link', 'del', 'dev', name]))
    return true
  }
}

/** The segments among the host's links. */
function segmentsIn (links: IpLink[]): Segment[] {
  const vnis = new Set(links.map((link) => vniOfSegmentDevice(link.ifname)).filter((vni): vni is number => vni !== null))
  return [...vnis].sort((a, b) => a - b).map((vni) => {
    const bridge = segmentBridgeOf(vni)
    return {
      vni,
      bridge,
      joined: links.some((link) => link.ifname === segmentVxlanOf(vni) && link.master === bridge),
      taps: links.filter((link) => link.master === bridge && link.linkinfo?.info_kind === 'tun').map((link) => link.ifname)
    }
  })
}
