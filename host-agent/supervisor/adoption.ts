/**
 * What an agent finds when it starts: the VMM processes of its own making that still run.
 *
 * VMM processes outlive the agent (they run in their own session). A starting agent lists the
 * cloud-hypervisor processes whose `--api-socket` lies under its own `vmms/` directory; each
 * either belongs to a record (and is adopted) or is a stray that nothing tracks (and is killed,
 * I3). A record's process is recognised by PID and start time, or, when the agent died before
 * it could record the PID, by the socket path that names the record's directory.
 */
import { sep } from 'node:path'
import type { Logger } from 'pino'
import { apiSocketOfCommandLine } from '../cloud-hypervisor/launch.js'
import { findProcesses, isRunning, type RunningProcess } from '../process/proc.js'

/** The live VMM processes under `vmmsDir`, by API socket path. */
export async function findVmmProcesses (vmmsDir: string): Promise<Map<string, RunningProcess>> {
  const found = await findProcesses((argv) => apiSocketOfCommandLine(argv)?.startsWith(vmmsDir + sep) ?? false)
  return new Map(found.map((p) => [apiSocketOfCommandLine(p.argv)!, p]))
}

/**
 * SIGKILLs the process groups of VMM processes (`why` says whose: strays no record owns, or every
 * VMM of a host its watchdog fences); returns how many it killed.
 */
export function killVmmProcesses (processes: Iterable<RunningProcess>, why: string, log: Logger): number {
  let killed = 0
  for (const vmm of processes) {
    // Re-check the identity right before the kill: the PID may have been reused since the scan.
    if (!isRunning(vmm)) continue
    try {
      process.kill(-vmm.pid, 'SIGKILL')
      killed++
      log.warn({ pid: vmm.pid, argv: vmm.argv }, `killed ${why}`)
    } catch (err) {
      log.error({ pid: vmm.pid, err: (err as Error).message }, `cannot kill ${why}`)
    }
  }
  return killed
}
