/**
 * CPU time and resident memory of one process, read from /proc while a benchmark runs. CPU is
 * the process's own user + system time (its children are not counted), as a share of one core.
 */
import { readFile } from 'node:fs/promises'
import { CLOCK_TICKS_PER_SECOND } from '../host-agent/process/proc.js'

interface Reading {
  at: number
  cpuSeconds: number
  rssMB: number
}

export async function readProcess (pid: number): Promise<Reading> {
  const [stat, status] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile(`/proc/${pid}/status`, 'utf8')])
  // Fields after the command name, which is in parentheses: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12])
  const rssKB = Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1] ?? Number.NaN)
  return { at: Date.now(), cpuSeconds: ticks / CLOCK_TICKS_PER_SECOND, rssMB: rssKB / 1024 }
}

export interface PhaseFigures {
  seconds: number
  /** Average CPU over the phase, in % of one core. */
  cpuPercent: number
  peakRssMB: number
}

/** Samples a process every `intervalMs` between `start()` and `stop()`. */
export class ProcessSampler {
  private readonly readings: Reading[] = []
  private timer: NodeJS.Timeout | null = null

  constructor (private readonly pid: number, private readonly intervalMs = 200) {}

  async start (): Promise<void> {
    this.readings.push(await readProcess(this.pid))
    this.timer = setInterval(() => {
      readProcess(this.pid).then((r) => { this.readings.push(r) }, () => {})
    }, this.intervalMs)
  }

  async stop (): Promise<PhaseFigures> {
    if (this.timer !== null) clearInterval(this.timer)
    this.readings.push(await readProcess(this.pid))
    const first = this.readings[0]
    const last = this.readings[this.readings.length - 1]
    const seconds = (last.at - first.at) / 1000
    return {
      seconds,
      cpuPercent: seconds > 0 ? (100 * (last.cpuSeconds - first.cpuSeconds)) / seconds : 0,
      peakRssMB: Math.max(...this.readings.map((r) => r.rssMB))
    }
  }
}

/** Measures a process over one phase of a benchmark. */
export async function measure<T> (pid: number, phase: () => Promise<T>): Promise<{ result: T, figures: PhaseFigures }> {
  const sampler = new ProcessSampler(pid)
  await sampler.start()
  const result = await phase()
  return { result, figures: await sampler.stop() }
}
