/**
 * Resident memory over a whole benchmark run: the peak of each vmplane process, and one host
 * agent's memory against the number of VMMs it holds, sampled every second from /proc.
 */
import { readdir, readFile } from 'node:fs/promises'
import { readProcess } from './process-sampler.js'
import { round } from './stats.js'

const INTERVAL_MS = 1000
/** The agent figure the targets name: its memory once it holds this many VMMs. */
const AGENT_VMMS = 200

export interface MemoryFigures {
  workerMB: number
  apiMB: number
  /** The measured agent's peak RSS until it first held more than 200 VMMs; null if it never held 200. */
  agentPer200VmmsMB: number | null
  /** What 100 more VMMs cost that agent: (RSS at 200 VMMs − RSS with none) / 2. */
  agentPer100VmmsMB: number | null
  agentIdleMB: number
  /** The peak RSS of any one simulator process sampled. */
  simulatorMB: number | null
}

interface AgentSample { vmms: number, rssMB: number }

export class MemoryWatch {
  private readonly peaks = new Map<string, number>()
  private readonly agentSamples: AgentSample[] = []
  private simulatorPeak: number | null = null
  private timer: NodeJS.Timeout | null = null
  private sampling: Promise<void> = Promise.resolve()

  /** `processes`: PIDs by name; `agent`: the PID of the agent whose VMMs are counted. */
  constructor (private readonly processes: { worker: number, api: number }, private readonly agentPid: number) {}

  async start (): Promise<void> {
    await this.sample()
    this.timer = setInterval(() => {
      // A process restarting misses a sample; the watch goes on.
      this.sampling = this.sampling.then(() => this.sample()).catch(() => {})
    }, INTERVAL_MS)
  }

  async stop (): Promise<MemoryFigures> {
    if (this.timer !== null) clearInterval(this.timer)
    await this.sampling
    await this.sample()
    const idle = this.agentSamples[0].rssMB
    const untilFull = this.agentSamples.slice(0, firstIndex(this.agentSamples, (s) => s.vmms > AGENT_VMMS))
    const reached = untilFull.some((s) => s.vmms >= AGENT_VMMS * 0.95)
    const at200 = reached ? Math.max(...untilFull.map((s) => s.rssMB)) : null
    return {
      workerMB: round(this.peaks.get('worker') ?? Number.NaN),
      apiMB: round(this.peaks.get('api') ?? Number.NaN),
      agentPer200VmmsMB: at200 === null ? null : round(at200),
      agentPer100VmmsMB: at200 === null ? null : round((at200 - idle) / 2),
      agentIdleMB: round(idle),
      simulatorMB: this.simulatorPeak === null ? null : round(this.simulatorPeak)
    }
  }

  private async sample (): Promise<void> {
    for (const [name, pid] of Object.entries(this.processes)) {
      const { rssMB } = await readProcess(pid)
      this.peaks.set(name, Math.max(this.peaks.get(name) ?? 0, rssMB))
    }
    const vmms = await childrenOf(this.agentPid)
    this.agentSamples.push({ vmms: vmms.length, rssMB: (await readProcess(this.agentPid)).rssMB })
    // A few of them: one may have just exited (a zombie has no resident memory to read).
    for (const pid of vmms.slice(0, 3)) {
      const simulator = await readProcess(pid).catch(() => null)
      if (simulator !== null && Number.isFinite(simulator.rssMB)) this.simulatorPeak = Math.max(this.simulatorPeak ?? 0, simulator.rssMB)
    }
  }
}

/**
 * The child processes of a process, from /proc/<pid>/task/<tid>/children. An agent's children are
 * the VMMs it started (in sessions of their own, still its children); reading these few files
 * costs far less than scanning every process's command line each second.
 */
async function childrenOf (pid: number): Promise<number[]> {
  const threads = await readdir(`/proc/${pid}/task`)
  const lists = await Promise.all(threads.map(async (tid) => await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '')))
  return lists.flatMap((list) => list.split(' ').filter((p) => p !== '').map(Number))
}

function firstIndex<T> (items: T[], test: (item: T) => boolean): number {
  const index = items.findIndex(test)
  return index === -1 ? items.length : index
}
