/**
 * A network's segment on a host: the bridge its interfaces' TAPs are attached to, the VXLAN
 * device that joins that bridge to the same network's bridges on other hosts, and the veth pair
 * that is the network's gateway on the host (one end on the bridge, the other the host's), all
 * named after
 * the network's VNI (chosen and recorded with the network, never reused: db/migrations/015), so
 * every host, every retry and a restarted agent derive the same names, and the agent can tell its
 * devices from anyone else's by name alone (docs/design.md §19).
 *
 * Frames a segment floods (broadcast, unknown unicast, multicast) go to a multicast group derived
 * from the VNI, which only hosts with that network's segment join; unicast goes where the VXLAN
 * device learned the MAC to be. Other networks' frames never meet: another VNI, another bridge.
 */

/** VXLAN network identifiers are 24 bits; vmplane hands them out from 4096 up (below is left for operators). */
export const VNI_RANGE = { min: 4096, max: 16_777_215 }

/** A network's way out to the hosts' LAN: none, or NAT by the host of each interface. */
export const NETWORK_OUTBOUND = ['none', 'nat'] as const
export type NetworkOutbound = typeof NETWORK_OUTBOUND[number]

/** The UDP port VXLAN is sent to (IANA's). */
export const VXLAN_PORT = 4789

/** What VXLAN over IPv4 adds to every frame: outer IPv4 (20), UDP (8), VXLAN (8) and inner Ethernet (14) headers. */
const VXLAN_OVERHEAD = 50

/**
 * The MTU of every guest interface, TAP and segment: a standard Ethernet's, so a guest's frames
 * are what any guest expects, and Cloud Hypervisor's announcement of a migrated NIC (a RARP frame
 * padded to the full 1514 bytes) crosses the segment.
 */
export const GUEST_MTU = 1500

/** The MTU the hosts' LAN must carry: a guest's frame once VXLAN wraps it (hypervisor LANs run jumbo frames). */
export const UNDERLAY_MTU = GUEST_MTU + VXLAN_OVERHEAD

const BRIDGE_PREFIX = 'vmpn'
const VXLAN_PREFIX = 'vmpx'
const GATEWAY_PREFIX = 'vmpg'
const GATEWAY_PORT_PREFIX = 'vmpq'
const NAME_PATTERN = /^vmp[nxgq][0-9a-f]{6}$/

function hexOf (vni: number): string {
  return vni.toString(16).padStart(6, '0')
}

export function segmentBridgeOf (vni: number): string {
  return BRIDGE_PREFIX + hexOf(vni)
}

export function segmentVxlanOf (vni: number): string {
  return VXLAN_PREFIX + hexOf(vni)
}

/** The host's end of the network's gateway on this host (a veth with the gateway's MAC and address). */
export function segmentGatewayOf (vni: number): string {
  return GATEWAY_PREFIX + hexOf(vni)
}

/** The gateway veth's other end, a port of the segment's bridge. */
export function segmentGatewayPortOf (vni: number): string {
  return GATEWAY_PORT_PREFIX + hexOf(vni)
}

/**
 * The MAC of a network's gateway: the same on every host, since the gateway is (its address on a
 * device of the segment on each host), so a guest that moves finds it at the MAC it knows. Locally
 * administered, `02:76:70` ("vp") and the VNI's three bytes. Each host keeps it to itself: frames
 * from it never cross the VXLAN device (host-agent/network/host-firewall.ts), and what the host
 * routes onto the segment leaves with the bridge's own MAC.
 */
export function gatewayMacOf (vni: number): string {
  return `02:76:70:${hexOf(vni).match(/../g)!.join(':')}`
}

/** The VNI a segment device is named after, or null for a name that is not a segment's. */
export function vniOfSegmentDevice (name: string): number | null {
  return NAME_PATTERN.test(name) ? Number.parseInt(name.slice(4), 16) : null
}

/**
 * The multicast group a segment floods to: one of the 2^18 groups of 239.192.0.0/14, the
 * organization-local scope (RFC 2365), picked by the VNI's low 18 bits. Two networks that share a
 * group only share its floods' delivery: each VXLAN device takes only its own VNI's frames.
 */
export function segmentGroupOf (vni: number): string {
  const low = vni & 0x3ffff
  return `239.${192 + (low >> 16)}.${(low >> 8) & 0xff}.${low & 0xff}`
}
