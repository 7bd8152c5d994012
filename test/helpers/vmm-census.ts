/**
 * Counts, from /proc, the live VMM processes of every instance on every host of a stack, every
 * `intervalMs`: what runs, whether or not its host's agent answers (cut off, frozen, crashing, or
 * killed). A sample that finds two live VMM processes of one instance is a guest run twice (I6); a
 * fenced host's VMMs count for as long as their processes live. Zombies do not: their guest is gone.
 *
 * Each process is named by the VMM directory its API socket is in (`<state>/vmms/<vmm id>/`), and
 * its instance read once from the agent's record there. A VMM's own child is not another VMM: the
 * simulator forks mtools to read a cloud-init seed, and between the fork and the exec the child
 * shows its parent's command line. So a process is read again once listed (`/proc/<pid>/stat`):
 * one whose parent is a process of the same VMM is counted as part of it, and one that has since
 * become another program, or ended, is no VMM of this sample.
 */
import { readFile } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { apiSocketOfCommandLine } from '../../host-agent/cloud-hypervisor/launch.js'
import { findProcesses } from '../../host-agent/process/proc.js'
import type { TestStack } from './stack.js'

/** The program the VMM processes run, whose name /proc cuts to 15 characters. */
const VMM_PROGRAM = 'cloud-hypervisor'

export interface DoubleSample {
  at: number
  instanceId: string
  /** `<vmm id> on <host id> (pid <pid>)` for each live process of the instance. */
  vmms: string[]
}

export interface VmmCensus {
  /** Every sample that found an instance with two live VMM processes. */
  doubles: () => DoubleSample[]
  samples: () => number
  stop: () => Promise<void>
}

export function takeVmmCensus (stack: TestStack, intervalMs = 100): VmmCensus {
  const vmmsDirs = stack.info.hosts.map((host) => ({ hostId: host.id, dir: join(host.stateDir, 'vmms') + sep }))
  const instanceOf = new Map<string, string | null>()
  const doubles: DoubleSample[] = []
  let samples = 0
  const stopped = new AbortController()

  async function instanceOfVmm (vmmDir: string): Promise<string | null> {
    if (!instanceOf.has(vmmDir)) {
      const record = await readFile(join(vmmDir, 'record.json'), 'utf8').then((text) => JSON.parse(text) as { instanceId: string }, () => null)
      if (record === null) return null
      instanceOf.set(vmmDir, record.instanceId)
    }
    return instanceOf.get(vmmDir) ?? null
  }

  /** The process's program name (cut to 15 characters) and parent, from /proc/<pid>/stat; null once it has ended. */
  async function statOf (pid: number): Promise<{ comm: string, ppid: number } | null> {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null)
    if (stat === null) return null
    const close = stat.lastIndexOf(')')
    return { comm: stat.slice(stat.indexOf('(') + 1, close), ppid: Number(stat.slice(close + 2).split(' ')[1]) }
  }

  async function sample (): Promise<void> {
    const at = Date.now()
    const processes = await findProcesses((argv) => {
      const socket = apiSocketOfCommandLine(argv)
      return socket !== null && vmmsDirs.some(({ dir }) => socket.startsWith(dir))
    })
    const pids = new Map(processes.map((process) => [process.pid, apiSocketOfCommandLine(process.argv)!]))
    const byInstance = new Map<string, string[]>()
    for (const process of processes) {
      const socket = pids.get(process.pid)!
      const stat = await statOf(process.pid)
      if (stat === null || !VMM_PROGRAM.startsWith(stat.comm) || pids.get(stat.ppid) === socket) continue
      const host = vmmsDirs.find(({ dir }) => socket.startsWith(dir))!
      const vmmId = socket.slice(host.dir.length).split(sep)[0]!
      const instanceId = await instanceOfVmm(join(host.dir, vmmId))
      if (instanceId === null) continue
      byInstance.set(instanceId, [...byInstance.get(instanceId) ?? [], `${vmmId} on ${host.hostId} (pid ${process.pid})`])
    }
    for (const [instanceId, vmms] of byInstance) if (vmms.length > 1) doubles.push({ at, instanceId, vmms })
    samples++
  }

  const running = (async () => {
    while (!stopped.signal.aborted) {
      const started = Date.now()
      await sample()
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, intervalMs - (Date.now() - started))))
    }
  })()

  return {
    doubles: () => [...doubles],
    samples: () => samples,
    async stop () {
      stopped.abort()
      await running
    }
  }
}
