/**
 * The tools a dev stack's hosts need (host-agent/host-tools.ts: qemu-img, dosfstools, mtools,
 * iproute2, setpriv) and its network's (nftables, stack-lan.ts), installed with apt-get when one
 * is missing. `npm start` and `npm test` call `ensureHostTools()` before anything starts an agent;
 * once they are there, each run only pays for a lookup on PATH.
 */
import { HOST_TOOLS, missingHostTools, withSbin } from '../host-agent/host-tools.js'
import { installDebianPackages } from '../scripts/tools/debian-packages.js'
import { LAN_TOOLS } from './stack-lan.js'

const TOOLS = [...HOST_TOOLS, ...LAN_TOOLS]

export async function ensureHostTools (options: { log: (message: string) => void }): Promise<void> {
  const path = withSbin(process.env.PATH ?? '')
  const missing = await missingHostTools(path, TOOLS)
  if (missing.length === 0) return
  const packages = [...new Set(missing.map((tool) => tool.debianPackage))]
  await installDebianPackages(packages, `the host agent's and the dev stack's tools (${missing.map((tool) => tool.command).join(', ')})`, options.log)
  const still = await missingHostTools(path, TOOLS)
  if (still.length > 0) throw new Error(`apt-get installed ${packages.join(' ')}, yet ${still.map((tool) => tool.command).join(', ')} cannot be found`)
}
