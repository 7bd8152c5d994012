/**
 * The host's firewall for its guests (docs/design.md §19): what may cross the host between its
 * networks' segments, its LAN and itself, enforced by nftables in the host's network namespace.
 *
 * Theory of operation. The agent owns two tables there, `inet vmplane` and `bridge vmplane`,
 * and nothing else. Both are built from what is on the host, its segments, and what the agent
 * knows of each, its live VMMs' interfaces on it (their network's way out), by one pure function
 * (`firewallRuleset`),
 * and replaced whole by one `nft -f` transaction: the tables are deleted and made again within
 * it, so no packet ever meets a host with its rules half made or missing, and a run with other
 * segments leaves no rule of the last. Every change of what the host runs rebuilds them (a VMM's
 * devices made or released) if their text changes; the agent's start, and the reconciler when it
 * removes a segment, replace them whatever they hold.
 *
 * Each host's bridge of a network holds the network's gateway (network/segments.ts), and the
 * host forwards (`net.ipv4.ip_forward`); bridged frames pass the `inet` hooks too
 * (`net.bridge.bridge-nf-call-iptables`, set by the agent in its namespace), so one forward chain
 * sees a segment's own traffic, the host's routing between segments and to the LAN, and the LAN's
 * replies:
 *
 * - a network's own traffic, within its bridge (in and out on the same segment), passes;
 * - a connection's replies pass (conntrack);
 * - a guest of a network with `outbound: nat` reaches anything off the segments, its host
 *   translating its address to its own on the LAN (masquerade);
 * - anything else to or from a segment is dropped: another network, the LAN coming in.
 *
 * The host itself takes from its guests only ping to their gateway and the replies to what it
 * sent them; frames from the gateway's MAC, the same on every host, never leave through a
 * VXLAN device, so each host answers for the gateway only to its own guests.
 */
import { gatewayMacOf, segmentBridgeOf, segmentVxlanOf, type NetworkOutbound } from '../../domain/network-segments.js'
import { IpCommands } from './ip-commands.js'
import { OneAtATime } from './one-at-a-time.js'

/** What the firewall needs of a network with a segment on the host. */
export interface SegmentPolicy {
  vni: number
  outbound: NetworkOutbound
}

const TABLE = 'vmplane'
/** Every segment's bridge and VXLAN device (domain/network-segments.ts names them). */
const ANY_BRIDGE = '"vmpn*"'

/** Each segment's policy: NAT if a live VMM's interface on it says so (they all say the same: it is the network's). */
export function segmentPolicies (vnis: readonly number[], interfaces: ReadonlyArray<{ vni: number, outbound: NetworkOutbound }>): SegmentPolicy[] {
  return vnis.map((vni) => ({ vni, outbound: interfaces.some((nic) => nic.vni === vni && nic.outbound === 'nat') ? 'nat' : 'none' }))
}

/** The host's two tables for these segments, as one `nft -f` transaction that replaces them whole. */
export function firewallRuleset (segments: readonly SegmentPolicy[]): string {
  const sorted = [...segments].sort((a, b) => a.vni - b.vni)
  const bridge = (segment: SegmentPolicy): string => `"${segmentBridgeOf(segment.vni)}"`
  const natted = sorted.filter((segment) => segment.outbound === 'nat')
  return [
    // Made first (empty if new) so that the deletes always have something to delete.
    `table inet ${TABLE}`,
    `delete table inet ${TABLE}`,
    `table bridge ${TABLE}`,
    `delete table bridge ${TABLE}`,
    `table inet ${TABLE} {`,
    '  chain input {',
    '    type filter hook input priority filter; policy accept;',
    `    iifname ${ANY_BRIDGE} ct state established,related accept`,
    `    iifname ${ANY_BRIDGE} icmp type echo-request accept`,
    `    iifname ${ANY_BRIDGE} drop`,
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter; policy accept;',
    ...sorted.map((segment) => `    iifname ${bridge(segment)} oifname ${bridge(segment)} accept`),
    '    ct state established,related accept',
    ...natted.map((segment) => `    iifname ${bridge(segment)} oifname != ${ANY_BRIDGE} accept`),
    `    iifname ${ANY_BRIDGE} drop`,
    `    oifname ${ANY_BRIDGE} drop`,
    '  }',
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    ...natted.map((segment) => `    iifname ${bridge(segment)} oifname != ${ANY_BRIDGE} masquerade`),
    '  }',
    '}',
    `table bridge ${TABLE} {`,
    '  chain output {',
    '    type filter hook output priority filter; policy accept;',
    ...sorted.map((segment) => `    oifname "${segmentVxlanOf(segment.vni)}" ether saddr ${gatewayMacOf(segment.vni)} drop`),
    '  }',
    '}'
  ].join('\n') + '\n'
}

export class HostFirewall {
  readonly #oneAtATime = new OneAtATime<'tables'>()
  readonly #ip: IpCommands
  /** The ruleset the tables were last replaced with; null before the first. */
  #applied: string | null = null

  /** `segments` says what the host has now: it is read when a rebuild runs, not when it is asked for. */
  constructor (readonly netns: string | null, private readonly segments: () => Promise<SegmentPolicy[]>) {
    this.#ip = new IpCommands(netns)
  }

  /** Lets the host route for its guests and its firewall see their bridged frames (at start-up). */
  async enableForwarding (): Promise<void> {
    await this.#ip.exec('sysctl', ['-qw', 'net.ipv4.ip_forward=1', 'net.bridge.bridge-nf-call-iptables=1'])
  }

  /**
   * Replaces the host's tables with those of what it has now, one rebuild at a time, each reading
   * the host as it starts. A VMM's boot or end that changes no segment (most do not: the network
   * was on the host already) leaves the tables as they are, unless `force` says to replace them
   * anyway: at the agent's start, and when the reconciler removes a segment, which repair them
   * whatever happened to them meanwhile.
   */
  async rebuild (options: { force?: boolean } = {}): Promise<void> {
    await this.#oneAtATime.run('tables', async () => {
      const ruleset = firewallRuleset(await this.segments())
      if (ruleset === this.#applied && options.force !== true) return
      await this.#ip.exec('nft', ['-f', '-'], ruleset)
      this.#applied = ruleset
    })
  }
}
