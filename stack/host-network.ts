/**
 * A simulated host's network: a network namespace of its own, where its agent makes its networks'
 * segments and TAPs, so the dev stack and the tests never touch the machine's own interfaces. Made
 * as root with iproute2. In the dev stack the namespace is also on the stack's LAN (stack-lan.ts),
 * whose port `eth0` carries its segments' VXLAN, and its agent runs inside it, as on a machine of
 * its own. A test's host (`createHostNetwork`) is on no LAN: its `eth0` is one end of a veth pair
 * whose other end is in the namespace too, enough to carry VXLAN to nobody.
 *
 * A dev stack's namespaces are named after its data directory and host (`vmp-<hash>-host-1`) and
 * outlive a stop that leaves VMMs running, as a real host's network outlives its control plane:
 * the next start's agents find their VMMs' TAPs there. They go when the stack stops with no VMM
 * left, or when a test's stack is torn down. Removing a namespace removes every TAP in it, and
 * every veth with an end in it. What a stack killed before its teardown left is removed by the
 * next stack's start, once nothing runs in it (leftover-networks.ts).
 */
import { createHash, randomBytes } from 'node:crypto'
import { UNDERLAY_MTU } from '../domain/network-segments.js'
import { runCommand } from '../host-agent/process/command.js'

/** A host's port on its LAN, as a machine's first Ethernet port is called: its segments' underlay (VMPLANE_AGENT_UNDERLAY). */
export const HOST_UPLINK = 'eth0'

export interface HostNetwork {
  netns: string
  remove: () => Promise<void>
}

/** What every network name of a dev stack begins with: `vmp-<hash of its data directory>-`. */
export function stackPrefix (dataDir: string): string {
  return `vmp-${createHash('sha256').update(dataDir).digest('hex').slice(0, 8)}-`
}

/** The prefix of the dev stack a network name is of (`vmp-<hash>-lan`, `vmp-<hash>-host-1`, `vmp-<hash>`), or null. */
export function stackPrefixOf (name: string): string | null {
  const hash = /^vmp-[0-9a-f]{8}(?=-|$)/.exec(name)?.[0]
  return hash === undefined ? null : `${hash}-`
}

/** The namespace of a dev stack's host. */
export function hostNetworkName (dataDir: string, hostId: string): string {
  return stackPrefix(dataDir) + hostId
}

/** The namespace, made if missing. */
export async function ensureHostNetwork (netns: string): Promise<HostNetwork> {
  if (process.getuid?.() !== 0) {
    throw new Error('simulated hosts need root: each gets a network namespace of its own for its TAPs (run as root)')
  }
  if (!(await listNamespaces()).includes(netns)) await runCommand('ip', ['netns', 'add', netns])
  await runCommand('ip', ['-n', netns, 'link', 'set', 'lo', 'up'])
  return { netns, remove: async () => { await removeNamespace(netns) } }
}

/** A throw-away host network for a test, on no LAN: `vmp-<label>-<random>`, with its `eth0` UP. */
export async function createHostNetwork (label: string): Promise<HostNetwork> {
  const network = await ensureHostNetwork(`vmp-${label}-${randomBytes(3).toString('hex')}`)
  await runCommand('ip', ['-n', network.netns, '-batch', '-'], {
    input: [
      `link add ${HOST_UPLINK} mtu ${UNDERLAY_MTU} type veth peer name ${HOST_UPLINK}-peer mtu ${UNDERLAY_MTU}`,
      `link set ${HOST_UPLINK}-peer up`,
      `link set ${HOST_UPLINK} up`
    ].join('\n') + '\n'
  })
  return network
}

/** Removes every namespace whose name begins with a dev stack's `prefix` (stack-lan.ts `removeStackNetwork` removes the rest). */
export async function removeHostNetworks (prefix: string): Promise<void> {
  for (const netns of await listNamespaces()) if (netns.startsWith(prefix)) await removeNamespace(netns)
}

/** Whether any process runs inside the namespace (a host agent, a VMM); one that cannot be told counts as in use. */
export async function namespaceInUse (netns: string): Promise<boolean> {
  return await runCommand('ip', ['netns', 'pids', netns]).then((pids) => pids.trim() !== '', () => true)
}

export async function listNamespaces (): Promise<string[]> {
  const listed = await runCommand('ip', ['-json', 'netns', 'list'])
  return listed.trim() === '' ? [] : (JSON.parse(listed) as Array<{ name: string }>).map((ns) => ns.name)
}

async function removeNamespace (netns: string): Promise<void> {
  await runCommand('ip', ['netns', 'del', netns]).catch(() => {})
}
