/**
 * The programs the agent builds devices with, and the Debian packages they come in. The agent
 * checks them at start-up, so a host missing one fails at once, saying which package to install,
 * rather than at its first VM; `npm start` and `npm test` install them (stack/host-tools.ts).
 */
import { constants } from 'node:fs'
import { access } from 'node:fs/promises'
import { delimiter, join } from 'node:path'

export interface HostTool {
  command: string
  debianPackage: string
}

export const HOST_TOOLS: readonly HostTool[] = [
  { command: 'qemu-img', debianPackage: 'qemu-utils' },
  { command: 'mkdosfs', debianPackage: 'dosfstools' },
  { command: 'mcopy', debianPackage: 'mtools' },
  { command: 'ip', debianPackage: 'iproute2' },
  { command: 'nft', debianPackage: 'nftables' },
  { command: 'sysctl', debianPackage: 'procps' },
  { command: 'setpriv', debianPackage: 'util-linux' }
]

/** Where Debian puts administrators' programs, which a non-root PATH may leave out. */
const SBIN_DIRS = ['/usr/sbin', '/sbin']

/** PATH with the sbin directories added, so `mkdosfs` and `ip` are found whoever runs the agent. */
export function withSbin (path: string): string {
  const dirs = path.split(delimiter).filter((dir) => dir !== '')
  return [...dirs, ...SBIN_DIRS.filter((dir) => !dirs.includes(dir))].join(delimiter)
}

/** The host tools (or these others) not found on `path`. */
export async function missingHostTools (path: string, tools: readonly HostTool[] = HOST_TOOLS): Promise<HostTool[]> {
  const missing: HostTool[] = []
  for (const tool of tools) {
    const found = await Promise.any(path.split(delimiter).filter((dir) => dir !== '')
      .map(async (dir) => { await access(join(dir, tool.command), constants.X_OK) })).then(() => true, () => false)
    if (!found) missing.push(tool)
  }
  return missing
}
