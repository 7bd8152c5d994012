/**
 * Network partitions of a test stack's host: its agent keeps running, as on a real host whose
 * network fails, and only the network between it and the rest of the stack is cut
 * (stack/stack-lan.ts draws that network).
 *
 *   link-down      its cable pulled: its port on the LAN's bridge goes down, so its eth0 loses
 *                  carrier and nothing passes either way (its own addresses and routes stay)
 *   drop-both      an nftables drop in its namespace of everything in and out of its eth0
 *   drop-outgoing  a drop of everything it sends: it hears the control plane, but cannot
 *                  answer a call or report to Temporal
 *   drop-incoming  a drop of what arrives for its agent's port: it cannot be called, and it
 *                  still reports, since its own connections to Temporal pass both ways
 *   drop-all-incoming  a drop of every packet that arrives: its NIC deaf, so no connection of
 *                  its own completes either (a host lost, test/faults/host-loss.test.ts)
 *   drop-control-plane  a drop of all it exchanges with the control plane (the LAN's gateway),
 *                  both ways: its peers on the LAN still reach it, and it them
 *
 * "Incoming" is by the agent's port rather than by every packet in: a TCP connection needs both
 * directions, so dropping all that comes in would cut the host's reports as well (their answers
 * come in), and conntrack's idea of which side opened a connection is unreliable for one older
 * than its first rule in the namespace (it takes the first packet it sees for the opener's).
 *
 * `healHost` undoes any of them, so a test's `finally` needs to know none.
 */
import { URL } from 'node:url'
import { runCommand } from '../../host-agent/process/command.js'
import { HOST_UPLINK } from '../../stack/host-network.js'
import type { TestStack } from './stack.js'

export const CUTS = ['link-down', 'drop-both', 'drop-outgoing', 'drop-incoming'] as const
/** The cuts that lose a host (test/faults/host-loss.test.ts), beside those above. */
export type Cut = (typeof CUTS)[number] | 'drop-all-incoming' | 'drop-control-plane'

/** The table a cut adds to the host's namespace; a test's own, which no other rule shares. */
const TABLE = 'vmplane-partition'

function stackHost (stack: TestStack, hostId: string): TestStack['info']['hosts'][number] {
  const host = stack.info.hosts.find((h) => h.id === hostId)
  if (host === undefined) throw new Error(`the stack has no host ${hostId}`)
  return host
}

/** The nftables rules of a drop: an input and an output chain on the host's eth0. */
function dropRules (cut: Exclude<Cut, 'link-down'>, agentPort: string, gateway: string): string {
  const only = cut === 'drop-control-plane' ? { input: `ip saddr ${gateway} `, output: `ip daddr ${gateway} ` } : { input: '', output: '' }
  const input = cut === 'drop-outgoing' ? '' : `iifname "${HOST_UPLINK}" ${only.input}${cut === 'drop-incoming' ? `tcp dport ${agentPort} ` : ''}drop`
  const output = cut === 'drop-incoming' || cut === 'drop-all-incoming' ? '' : `oifname "${HOST_UPLINK}" ${only.output}drop`
  const chain = (hook: string, rule: string): string => `  chain ${hook} {\n    type filter hook ${hook} priority filter; policy accept;\n    ${rule}\n  }`
  return `table inet ${TABLE} {\n${chain('input', input)}\n${chain('output', output)}\n}`
}

export async function cutHost (stack: TestStack, hostId: string, cut: Cut): Promise<void> {
  const host = stackHost(stack, hostId)
  if (cut === 'link-down') {
    await runCommand('ip', ['-n', stack.info.lan.netns, 'link', 'set', hostId, 'down'])
    return
  }
  await runCommand('ip', ['netns', 'exec', host.netns, 'nft', dropRules(cut, new URL(host.url).port, stack.info.lan.gateway)])
}

/** Undoes whatever cut the host has: its LAN port up, the drop's table gone. */
export async function healHost (stack: TestStack, hostId: string): Promise<void> {
  const host = stackHost(stack, hostId)
  await runCommand('ip', ['-n', stack.info.lan.netns, 'link', 'set', hostId, 'up'])
  const tables = await runCommand('ip', ['netns', 'exec', host.netns, 'nft', 'list', 'tables'])
  if (tables.includes(`inet ${TABLE}`)) await runCommand('ip', ['netns', 'exec', host.netns, 'nft', 'delete', 'table', 'inet', TABLE])
}
