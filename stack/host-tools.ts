/**
 * The tools a dev stack's hosts need (host-agent/host-tools.ts: qemu-img, dosfstools, mtools,
 * iproute2, setpriv), its network's (nftables, stack-lan.ts) and the probes of its guests'
 * network (ping), installed with apt-get when one is missing. `npm start` and `npm test` call
 * `ensureHostTools()` before anything starts an agent; once they are there, each run only pays
 * for a lookup on PATH.
 */
import { HOST_TOOLS, missingHostTools, withSbin, type HostTool } from '../host-agent/host-tools.js'
import { installDebianPackages } from '../scripts/tools/debian-packages.js'
import { LAN_TOOLS } from './stack-lan.js'

/**
 * What probes a simulated guest's network from its host's namespace: the tests'
 * (test/helpers/net-probe.ts) and the runbook's. TCP needs nothing more than Node.
 */
export const PROBE_TOOLS: readonly HostTool[] = [{ command: 'ping', debianPackage: 'iputils-ping' }]

const TOOLS = [...HOST_TOOLS, ...LAN_TOOLS, ...PROBE_TOOLS]

export async function ensureHostTools (options: { log: (message: string) => void }): Promise<void> {
  const path = withSbin(process.env.PATH ?? '')
  const missing = await missingHostTools(path, TOOLS)
  if (missing.length === 0) return
  const packages = [...new Set(missing.map((tool) => tool.debianPackage))]
  await installDebianPackages(packages, `the host agent's and the dev stack's tools (${missing.map((tool) => tool.command).join(', ')})`, options.log)
  const still = await missingHostTools(path, TOOLS)
  if (still.length > 0) throw new Error(`apt-get installed ${packages.join(' ')}, yet ${still.map((tool) => tool.command).join(', ')} cannot be found`)
}
