/**
 * The host's firewall for its guests (docs/design.md §19): what may reach its guests, cross the
 * host between its networks' segments and its LAN, and reach the host itself, enforced by
 * nftables in the host's network namespace.
 *
 * Theory of operation. The agent owns two tables there, `inet vmplane` and `bridge vmplane`,
 * and nothing else. Both are built by one pure function (`firewallRuleset`) from what is on the
 * host (its segments) and what the agent knows of its live VMMs (their interfaces, their
 * networks' way out, and the policy the control plane resolved from the firewall rules for each),
 * and replaced whole by one `nft -f` transaction: the tables are deleted and made again within
 * it, so no packet ever meets a host with its rules half made or missing, and a run with other
 * guests leaves no rule of the last. Every change of what the host runs (a VMM's devices made or
 * released, a policy taken) rebuilds them if their text changes; the agent's start, and the
 * reconciler when it removes a segment, replace them whatever they hold.
 *
 * Where a packet is judged. The host of the guest it is for judges it, with that guest's rules,
 * statefully, wherever it came from; nothing else does. Every packet for a guest crosses its
 * host's forward hook on the way to its TAP, in one of two ways:
 *
 * - bridged (from another guest of its network on the host, or from another host over the VXLAN
 *   device, whether a guest sent it there or a host routed it onto the segment): bridged frames
 *   pass the `inet` hooks (`net.bridge.bridge-nf-call-iptables`, set by the agent in its
 *   namespace), and the bridge family marks those leaving by a guest's TAP, so the forward chain
 *   knows them from frames leaving over VXLAN or to the gateway, which are not its to judge;
 * - routed by this host onto the segment (from another network's gateway, or from the LAN).
 *
 * A guest's chain (`in_<tap>`) lets in its own network's traffic (its TAP's neighbours send only
 * as themselves: the bridge family drops any other MAC or address from a TAP), then what its
 * ingress rules allow, and drops the rest; replies to what it sent pass (conntrack). What a guest
 * sends is free, unless egress rules apply to it: then its chain `out_<tap>`, on frames bridged
 * from its TAP (marked too), lets its network and what they allow go on, to the receiver's
 * judgement, and drops the rest. Bridged frames are tracked
 * in a connection-tracking zone of their own, apart from the host's routing of the same packets:
 * a guest's packet to be routed is seen bridged on its way to the gateway's port (segments.ts),
 * then routed afresh, and each leg keeps its own state.
 *
 * What the host routes: between segments (the destination's host judges), out to the LAN for
 * networks with `outbound: nat` (masqueraded as the host), and from the LAN only to its own
 * guests whose rules allow it. The host itself takes from its guests only ping to their gateway
 * and the replies to what it sent them. Nothing crosses between a segment's VXLAN device and its
 * gateway's port, so each host is the gateway of its own guests only, and never answers for the
 * gateway on another host's segment.
 */
import type { Allowance, VmmInterface, VmmPolicy } from '../../domain/host-agent-api.js'
import { macOf, tapNameOf } from '../../domain/interfaces.js'
import { networkOf } from '../../domain/ipv4.js'
import { segmentBridgeOf, segmentGatewayOf, segmentGatewayPortOf, segmentVxlanOf, type NetworkOutbound } from '../../domain/network-segments.js'
import { IpCommands } from './ip-commands.js'
import { OneAtATime } from './one-at-a-time.js'

const TABLE = 'vmplane'
/** Every segment's bridge (domain/network-segments.ts names them). */
const ANY_BRIDGE = '"vmpn*"'
/** Every segment's gateway, where what guests send to be routed comes in. */
const ANY_GATEWAY = '"vmpg*"'
/** The zone bridged frames are tracked in, apart from the host's routing (zone 0). */
const BRIDGED_ZONE = 1
/** The packet mark's bit of a bridged frame that came in by a guest's TAP, for the forward chain to judge what it sends. */
const FROM_GUEST = '0x00000100'
/** The packet mark's bit of a bridged frame leaving by a guest's TAP, for the forward chain to judge what it receives. */
const TO_GUEST = '0x00000200'
const marked = (bit: string): string => `meta mark & ${bit} == ${bit}`

/** What the firewall needs of a network with a segment on the host: its range, its way out. */
export interface SegmentPolicy {
  vni: number
  cidr: string
  outbound: NetworkOutbound
}

/** A guest's interface on the host: its TAP, the MAC and address it may send from, and what its rules let in and out. */
export interface GuestPolicy {
  tap: string
  mac: string
  address: string
  vni: number
  ingress: VmmPolicy['ingress']
  /** Null: it may send anywhere. */
  egress: VmmPolicy['egress']
}

export interface HostPlan {
  segments: SegmentPolicy[]
  guests: GuestPolicy[]
}

/** A live VMM of the host, as the firewall reads it. */
export interface LiveVmm {
  spec: { interfaces?: VmmInterface[] }
  policy: VmmPolicy | null
}

/**
 * The plan for the segments on the host (`vnis`) and its live VMMs: each segment with its range
 * and way out, as the interfaces on it say, or the policy that routes to it; each interface with
 * what its instance's rules let in. A segment no live VMM claims has no rule: it is a leftover,
 * which goes at the next prune.
 */
export function hostPlan (vnis: readonly number[], vmms: readonly LiveVmm[]): HostPlan {
  const interfaces = vmms.flatMap((vmm) => (vmm.spec.interfaces ?? []).map((nic) => ({ nic, ingress: vmm.policy?.ingress ?? [], egress: vmm.policy?.egress ?? null })))
  const routes = vmms.flatMap((vmm) => vmm.policy?.routes ?? [])
  const segments: SegmentPolicy[] = []
  for (const vni of vnis) {
    const own = interfaces.filter(({ nic }) => nic.vni === vni)
    // An address of the network with its prefix: an interface's, or the gateway of a route to it.
    const inRange = own[0]?.nic.address ?? routes.find((route) => route.vni === vni)?.gateway
    if (inRange === undefined) continue
    segments.push({ vni, cidr: networkOf(inRange), outbound: own.some(({ nic }) => nic.outbound === 'nat') ? 'nat' : 'none' })
  }
  return {
    segments,
    guests: interfaces.map(({ nic, ingress, egress }) => ({ tap: tapNameOf(nic.id), mac: macOf(nic.id), address: nic.address.split('/')[0]!, vni: nic.vni, ingress, egress }))
  }
}

/** What a rule's protocol and ports match, in nft's words. */
function matchOf (allowance: Allowance): string {
  if (allowance.protocol === 'any') return ''
  if (allowance.protocol === 'icmp') return ' meta l4proto icmp'
  const ports = allowance.ports === undefined ? '' : ` th dport ${allowance.ports.from === allowance.ports.to ? allowance.ports.from : `${allowance.ports.from}-${allowance.ports.to}`}`
  return ` meta l4proto ${allowance.protocol}${ports}`
}

/** A guest's chain for what comes in: its network's traffic, then what its rules allow; the rest dropped. */
function ingressChain (guest: GuestPolicy, cidr: string): string[] {
  return [
    `  chain in_${guest.tap} {`,
    `    ip saddr ${cidr} accept`,
    ...guest.ingress.filter((allowance) => allowance.peers.length > 0)
      .map((allowance) => `    ip saddr { ${allowance.peers.join(', ')} }${matchOf(allowance)} accept`),
    '    drop',
    '  }'
  ]
}

/**
 * A guest's chain for what it sends, when egress rules apply to it: to its own network, or what
 * they allow, goes on (`return`) to be judged by the receiver's chain, if it is a guest here; the
 * rest is dropped.
 */
function egressChain (guest: GuestPolicy, egress: Allowance[], cidr: string): string[] {
  return [
    `  chain out_${guest.tap} {`,
    `    ip daddr ${cidr} return`,
    ...egress.filter((allowance) => allowance.peers.length > 0)
      .map((allowance) => `    ip daddr { ${allowance.peers.join(', ')} }${matchOf(allowance)} return`),
    '    drop',
    '  }'
  ]
}

/** The host's two tables for this plan, as one `nft -f` transaction that replaces them whole. */
export function firewallRuleset (plan: HostPlan): string {
  const segments = [...plan.segments].sort((a, b) => a.vni - b.vni)
  const cidrOf = new Map(segments.map((segment) => [segment.vni, segment.cidr]))
  // A guest whose segment has no range known has nothing to judge it by: it gets no chain, and what is for it is dropped.
  const guests = [...plan.guests].filter((guest) => cidrOf.has(guest.vni)).sort((a, b) => a.tap.localeCompare(b.tap))
  const bridge = (vni: number): string => `"${segmentBridgeOf(vni)}"`
  const natted = segments.filter((segment) => segment.outbound === 'nat')
  const restricted = guests.filter((guest) => guest.egress !== null)
  const taps = guests.length === 0 ? null : `{ ${guests.map((guest) => `"${guest.tap}"`).join(', ')} }`
  return [
    // Made first (empty if new) so that the deletes always have something to delete.
    `table inet ${TABLE}`,
    `delete table inet ${TABLE}`,
    `table bridge ${TABLE}`,
    `delete table bridge ${TABLE}`,
    `table inet ${TABLE} {`,
    '  chain prerouting {',
    '    type filter hook prerouting priority raw; policy accept;',
    `    iifname ${ANY_BRIDGE} ct zone set ${BRIDGED_ZONE}`,
    '  }',
    '  chain input {',
    '    type filter hook input priority filter; policy accept;',
    ...[ANY_BRIDGE, ANY_GATEWAY].flatMap((devices) => [
      `    iifname ${devices} ct state established,related accept`,
      `    iifname ${devices} icmp type echo-request accept`,
      `    iifname ${devices} drop`
    ]),
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter; policy accept;',
    '    ct state established,related accept',
    ...restricted.map((guest) => `    ${marked(FROM_GUEST)} ip saddr ${guest.address} jump out_${guest.tap}`),
    ...guests.flatMap((guest) => [
      `    ${marked(TO_GUEST)} ip daddr ${guest.address} jump in_${guest.tap}`,
      `    oifname ${bridge(guest.vni)} ip daddr ${guest.address} jump in_${guest.tap}`
    ]),
    // Broadcast and multicast within a network reach every TAP on it.
    ...segments.map((segment) => `    ${marked(TO_GUEST)} iifname ${bridge(segment.vni)} ip saddr ${segment.cidr} accept`),
    `    ${marked(TO_GUEST)} drop`,
    // Bridged, not to a guest here: over VXLAN to its own host, or to the gateway to be routed.
    `    iifname ${ANY_BRIDGE} accept`,
    // Routed onto a segment, not to a guest here: over VXLAN, to be judged by the guest's host.
    `    iifname ${ANY_GATEWAY} oifname ${ANY_BRIDGE} accept`,
    ...natted.map((segment) => `    iifname "${segmentGatewayOf(segment.vni)}" oifname != ${ANY_BRIDGE} accept`),
    `    iifname ${ANY_GATEWAY} drop`,
    `    oifname ${ANY_BRIDGE} drop`,
    '  }',
    ...restricted.flatMap((guest) => egressChain(guest, guest.egress!, cidrOf.get(guest.vni)!)),
    ...guests.flatMap((guest) => ingressChain(guest, cidrOf.get(guest.vni)!)),
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    ...natted.map((segment) => `    iifname "${segmentGatewayOf(segment.vni)}" oifname != ${ANY_BRIDGE} masquerade`),
    '  }',
    '}',
    `table bridge ${TABLE} {`,
    '  chain prerouting {',
    '    type filter hook prerouting priority filter; policy accept;',
    ...guests.flatMap((guest) => [
      `    iifname "${guest.tap}" ether saddr != ${guest.mac} drop`,
      `    iifname "${guest.tap}" ip saddr != ${guest.address} drop`,
      `    iifname "${guest.tap}" arp saddr ip != ${guest.address} drop`,
      `    iifname "${guest.tap}" arp saddr ether != ${guest.mac} drop`
    ]),
    ...taps === null ? [] : [`    iifname ${taps} meta mark set meta mark | ${FROM_GUEST}`],
    '  }',
    '  chain forward {',
    // The bridge family's filter priority runs before the bridge's own netfilter hook, which takes frames through the inet chains.
    '    type filter hook forward priority filter; policy accept;',
    ...segments.flatMap((segment) => [
      `    iifname "${segmentGatewayPortOf(segment.vni)}" oifname "${segmentVxlanOf(segment.vni)}" drop`,
      `    iifname "${segmentVxlanOf(segment.vni)}" oifname "${segmentGatewayPortOf(segment.vni)}" drop`
    ]),
    ...taps === null ? [] : [`    oifname ${taps} meta mark set meta mark | ${TO_GUEST}`],
    '  }',
    '}'
  ].join('\n') + '\n'
}

export class HostFirewall {
  readonly #oneAtATime = new OneAtATime<'tables'>()
  readonly #ip: IpCommands
  /** The ruleset the tables were last replaced with; null before the first. */
  #applied: string | null = null

  /** `plan` says what the host has now: it is read when a rebuild runs, not when it is asked for. */
  constructor (readonly netns: string | null, private readonly plan: () => Promise<HostPlan>) {
    this.#ip = new IpCommands(netns)
  }

  /** Lets the host route for its guests and its firewall see their bridged frames (at start-up). */
  async enableForwarding (): Promise<void> {
    await this.#ip.exec('sysctl', ['-qw', 'net.ipv4.ip_forward=1', 'net.bridge.bridge-nf-call-iptables=1'])
  }

  /**
   * Replaces the host's tables with those of what it has now, one rebuild at a time, each reading
   * the host as it starts. A change that leaves the text as it was (most VMMs' boots and ends: the
   * network was on the host already) leaves the tables as they are, unless `force` says to
   * replace them anyway: at the agent's start, and when the reconciler removes a segment, which
   * repair them whatever happened to them meanwhile.
   */
  async rebuild (options: { force?: boolean } = {}): Promise<void> {
    await this.#oneAtATime.run('tables', async () => {
      const ruleset = firewallRuleset(await this.plan())
      if (ruleset === this.#applied && options.force !== true) return
      await this.#ip.exec('nft', ['-f', '-'], ruleset)
      this.#applied = ruleset
    })
  }
}
