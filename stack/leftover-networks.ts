/**
 * What dev stacks that are gone left of their networks, removed when a stack starts. A stack's
 * network (its LAN's and its hosts' namespaces, `vmp-<hash>-…`, with the TAPs in them, and its
 * nftables table `ip vmp-<hash>`: stack-lan.ts, host-network.ts) outlives a stop that leaves VMMs
 * running, on purpose, and goes with the last of them. A stack killed before it could tear down
 * (SIGKILL, an OOM kill, a power cut of the process tree, the test that ran it killed) leaves it
 * for good: nothing starts again on its data directory, a test's being gone from /tmp.
 *
 * A network's names carry only a hash of its data directory, so whether it is still someone's is
 * judged by what would use it: a dev stack running on that data directory (a `dev-stack.js`
 * process, whose data directory is its VMPLANE_DATA_DIR, or the default, from its working
 * directory; it runs before it makes any of its network), or a process inside one of its
 * namespaces (its host agents, the VMMs they started, which a later start re-adopts). A network
 * with neither is a dead stack's and is removed, as that stack's own teardown would have. The
 * starting stack's own network is its to reuse and repair, and is never touched here.
 *
 * A stack killed alone leaves its components running, in process groups of their own: its agents
 * then keep its network in use, and only a start on its own data directory stops them
 * (pid-files.ts `claimDataDir`); once they are gone, the next start removes the network.
 */
import { readlink } from 'node:fs/promises'
import { resolve } from 'node:path'
import { DEFAULT_DATA_DIR } from '../cli/dev-stack-files.js'
import { listNamespaces, namespaceInUse, stackPrefix, stackPrefixOf } from './host-network.js'
import { DATA_DIR_MARK, isDevStack } from './pid-files.js'
import { allPids, processEnvironment } from './processes.js'
import { listStackTables, removeNetworkOf } from './stack-lan.js'

/** Removes the networks of dev stacks that are gone, other than `ownDataDir`'s; returns their prefixes. */
export async function removeLeftoverNetworks (ownDataDir: string): Promise<string[]> {
  // Names first, then what runs: a stack that made a name listed here was running before it.
  const namespaces = await listNamespaces()
  const names = [...namespaces, ...await listStackTables()]
  const own = stackPrefix(ownDataDir)
  const others = new Set(names.map(stackPrefixOf).filter((prefix): prefix is string => prefix !== null && prefix !== own))
  if (others.size === 0) return []
  const running = new Set((await runningStackDataDirs()).map(stackPrefix))
  const removed: string[] = []
  for (const prefix of others) {
    if (running.has(prefix)) continue
    const inUse = await Promise.all(namespaces.filter((netns) => netns.startsWith(prefix)).map(namespaceInUse))
    if (inUse.includes(true)) continue
    await removeNetworkOf(prefix)
    removed.push(prefix)
  }
  return removed
}

/** The data directory of every dev stack running on this machine, as its configuration resolves it (config.ts). */
async function runningStackDataDirs (): Promise<string[]> {
  const dataDirs: string[] = []
  for (const pid of await allPids()) {
    if (!await isDevStack(pid)) continue
    const env = await processEnvironment(pid)
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => null)
    if (env === null || cwd === null) continue
    const configured = env.find((entry) => entry.startsWith(`${DATA_DIR_MARK}=`))?.slice(DATA_DIR_MARK.length + 1)
    dataDirs.push(resolve(cwd, configured ?? DEFAULT_DATA_DIR))
  }
  return dataDirs
}
