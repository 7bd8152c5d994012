/**
 * The LAN a dev stack's simulated hosts are on, so each host is a machine of its own on the
 * network: its agent runs inside the host's namespace and listens on the host's own address, and
 * the control plane reaches it there, as it would a real hypervisor host. Cutting that network
 * (test/helpers/partition.ts) is then what losing a host is, not freezing its process.
 *
 *   root namespace          vmp-<hash>  <net>.1/24 ──┐
 *   vmp-<hash>-lan          bridge lan0: ports `uplink` and one per host (named after it)
 *   vmp-<hash>-host-<N>     eth0  <net>.<9+N>/24 ────┘   (lo, and the networks' segments and TAPs)
 *
 * Every link of the LAN has MTU 1550: it carries the networks' VXLAN, a guest's 1500-byte frame
 * and 50 bytes of wrapping (docs/design.md §19).
 *
 * The addresses come from 198.18.0.0/15, the range RFC 2544 keeps for network tests: they never
 * meet a real network. Each stack takes one /24 of it, `<net>.0/24`, first the one its data
 * directory's hash names, else a free one, so stacks side by side never share a subnet. Hosts
 * reach each other across the bridge without any forwarding; the root namespace is one more
 * station on it.
 *
 * The servers the agents call stay on loopback: Temporal listens on 127.0.0.1, and an nftables
 * DNAT in the stack's own table (`table ip vmp-<hash>`) sends what the hosts address to
 * <net>.1:<Temporal port> there. A packet from another interface may reach 127.0.0.1 only
 * where `route_localnet` is set, which is done on the stack's own root-side veth alone, never
 * machine-wide.
 *
 * Like the hosts' namespaces, the LAN outlives a stop that leaves VMMs running, and goes with
 * them (`removeStackNetwork`); what a stack killed before its teardown left goes at the next
 * stack's start (leftover-networks.ts).
 */
import { randomInt } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import { parseCidr, toAddress, toNumber } from '../domain/ipv4.js'
import { UNDERLAY_MTU } from '../domain/network-segments.js'
import { missingHostTools, withSbin, type HostTool } from '../host-agent/host-tools.js'
import { runCommand } from '../host-agent/process/command.js'
import { HOST_UPLINK, listNamespaces, removeHostNetworks, stackPrefix, stackPrefixOf } from './host-network.js'

/** What the LAN is made with besides iproute2 (`npm start` and `npm test` install it: stack/host-tools.ts). */
export const LAN_TOOLS: readonly HostTool[] = [{ command: 'nft', debianPackage: 'nftables' }]

/** RFC 2544's benchmarking range: 512 subnets of 256 addresses. */
const LAN_RANGE = parseCidr('198.18.0.0/15')
const SUBNETS = LAN_RANGE.size / 256
export const LAN_BRIDGE = 'lan0'
/** The root namespace's port on the LAN bridge. */
const LAN_UPLINK = 'uplink'
/** Host N is <net>.<FIRST_HOST_OCTET + N - 1>: .1 is the root namespace's, .2 to .9 are left free. */
const FIRST_HOST_OCTET = 10

export interface StackLan {
  /** The LAN's namespace, where each host's cable can be pulled (`ip -n <netns> link set <host id> down`). */
  netns: string
  /** Its /24, e.g. `198.18.7.0/24`. */
  subnet: string
  /** The root namespace's address on it: what the hosts reach the control plane's servers at. */
  gateway: string
}

function stackHash (dataDir: string): string {
  return stackPrefix(dataDir).slice(0, -1)
}

/** The LAN's namespace: `vmp-<hash>-lan`, named like the hosts' so that teardown finds it with them. */
function lanNetns (dataDir: string): string {
  return `${stackPrefix(dataDir)}lan`
}

/** Host i's (0-based) address on the LAN. */
export function hostAddress (lan: StackLan, index: number): string {
  return toAddress(parseCidr(lan.subnet).base + FIRST_HOST_OCTET + index)
}

/**
 * The stack's LAN, made or repaired, with the root namespace on it and `forwardedPorts` of
 * 127.0.0.1 reachable from the hosts at the gateway address.
 */
export async function ensureStackLan (dataDir: string, forwardedPorts: readonly number[]): Promise<StackLan> {
  const missing = await missingHostTools(withSbin(process.env.PATH ?? ''), LAN_TOOLS)
  if (missing.length > 0) throw new Error(`the dev stack's LAN needs ${missing.map((tool) => `${tool.command} (Debian package ${tool.debianPackage})`).join(', ')}: install it`)
  const netns = lanNetns(dataDir)
  const rootLink = stackHash(dataDir)
  if (!(await listNamespaces()).includes(netns)) await ip(null, ['netns', 'add', netns])
  if (!await linkExists(netns, LAN_BRIDGE)) await ip(netns, ['link', 'add', LAN_BRIDGE, 'type', 'bridge'])
  await ip(netns, ['link', 'set', LAN_BRIDGE, 'up'])
  if (!await linkExists(null, rootLink)) await ip(null, ['link', 'add', rootLink, 'type', 'veth', 'peer', 'name', LAN_UPLINK, 'netns', netns])
  await ip(netns, ['link', 'set', LAN_UPLINK, 'mtu', String(UNDERLAY_MTU), 'master', LAN_BRIDGE, 'up'])
  await ip(null, ['link', 'set', rootLink, 'mtu', String(UNDERLAY_MTU), 'up'])
  const gateway = await addressOf(null, rootLink) ?? await claimSubnet(dataDir, rootLink)
  const subnet = `${toAddress(toNumber(gateway) - 1)}/24`
  await writeFile(`/proc/sys/net/ipv4/conf/${rootLink}/route_localnet`, '1')
  await runCommand('nft', [forwardingRules(rootLink, gateway, forwardedPorts)])
  return { netns, subnet, gateway }
}

/**
 * The stack's table, named like its root link, replaced whole in one transaction (made empty
 * first so that the delete always has something to delete): a restart with other ports leaves no
 * rule of the last run behind.
 */
function forwardingRules (rootLink: string, gateway: string, ports: readonly number[]): string {
  const table = rootLink
  const rules = ports.map((port) =>
    `    iifname "${rootLink}" ip daddr ${gateway} tcp dport ${port} dnat ip to 127.0.0.1:${port}`)
  return [
    `table ip ${table}`,
    `delete table ip ${table}`,
    `table ip ${table} {`,
    '  chain prerouting {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    ...rules,
    '  }',
    '}'
  ].join('\n')
}

/**
 * Takes a /24 for the stack: the one its hash names unless something is routed there, else a
 * random free one. Two stacks starting at once may pick the same; each checks, once its address
 * is on, that its route is the only one, and otherwise gives it up and tries another.
 */
async function claimSubnet (dataDir: string, rootLink: string): Promise<string> {
  const preferred = Number.parseInt(stackHash(dataDir).slice(-8), 16) % SUBNETS
  for (let attempt = 0; attempt < SUBNETS; attempt++) {
    const base = LAN_RANGE.base + 256 * (attempt === 0 ? preferred : randomInt(SUBNETS))
    if ((await routedOverlapping(base)).length > 0) continue
    const gateway = toAddress(base + 1)
    await ip(null, ['addr', 'add', `${gateway}/24`, 'dev', rootLink])
    if ((await routedOverlapping(base)).every((route) => route.dev === rootLink)) return gateway
    await ip(null, ['addr', 'del', `${gateway}/24`, 'dev', rootLink])
  }
  throw new Error("no free /24 left in 198.18.0.0/15 for the stack's LAN: the root namespace routes all of it (ip route)")
}

/** The root namespace's IPv4 routes (any table) that overlap the /24 at `base`. */
async function routedOverlapping (base: number): Promise<Array<{ dst: string, dev?: string }>> {
  const routes = JSON.parse(await ip(null, ['-json', '-4', 'route', 'show', 'table', 'all'])) as Array<{ dst: string, dev?: string }>
  return routes.filter((route) => {
    if (route.dst === 'default') return false
    const cidr = parseCidr(route.dst.includes('/') ? route.dst : `${route.dst}/32`)
    return cidr.base < base + 256 && base < cidr.base + cidr.size
  })
}

/** Puts a host's namespace on the LAN at `address`: its eth0, a veth whose other end is the bridge's port named after the host. */
export async function attachHost (lan: StackLan, hostNetns: string, hostId: string, address: string): Promise<void> {
  if (!await linkExists(hostNetns, HOST_UPLINK)) await ip(hostNetns, ['link', 'add', HOST_UPLINK, 'type', 'veth', 'peer', 'name', hostId, 'netns', lan.netns])
  await ip(lan.netns, ['link', 'set', hostId, 'mtu', String(UNDERLAY_MTU), 'master', LAN_BRIDGE, 'up'])
  await ip(hostNetns, ['link', 'set', HOST_UPLINK, 'mtu', String(UNDERLAY_MTU)])
  if (await addressOf(hostNetns, HOST_UPLINK) !== address) {
    await ip(hostNetns, ['addr', 'flush', 'dev', HOST_UPLINK])
    await ip(hostNetns, ['addr', 'add', `${address}/24`, 'dev', HOST_UPLINK])
  }
  await ip(hostNetns, ['link', 'set', HOST_UPLINK, 'up'])
}

/** Removes every network of the dev stack on this data directory: its nftables table, the LAN and the hosts' namespaces. */
export async function removeStackNetwork (dataDir: string): Promise<void> {
  await removeNetworkOf(stackPrefix(dataDir))
}

/** Removes every network named with a dev stack's prefix (`vmp-<hash>-`), whatever its data directory. */
export async function removeNetworkOf (prefix: string): Promise<void> {
  await runCommand('nft', ['delete', 'table', 'ip', prefix.slice(0, -1)]).catch(() => {})
  // The root namespace's veth goes with its other end, in the LAN's namespace.
  await removeHostNetworks(prefix)
}

/** The dev stacks' nftables tables on this machine (`ip vmp-<hash>`), whoever made them. */
export async function listStackTables (): Promise<string[]> {
  const tables = (await runCommand('nft', ['list', 'tables'])).split('\n')
  return tables.map((line) => /^table ip (\S+)$/.exec(line.trim())?.[1] ?? '').filter((name) => stackPrefixOf(name) !== null)
}

async function linkExists (netns: string | null, link: string): Promise<boolean> {
  return await ip(netns, ['link', 'show', 'dev', link]).then(() => true, () => false)
}

/** The interface's IPv4 address, or null when it has none. */
async function addressOf (netns: string | null, link: string): Promise<string | null> {
  const [entry] = JSON.parse(await ip(netns, ['-json', '-4', 'addr', 'show', 'dev', link])) as Array<{ addr_info: Array<{ local: string }> }>
  return entry?.addr_info[0]?.local ?? null
}

function ip (netns: string | null, args: string[]): Promise<string> {
  return runCommand('ip', [...(netns === null ? [] : ['-n', netns]), ...args])
}
