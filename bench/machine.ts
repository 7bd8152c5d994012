/** What a benchmark ran on, recorded beside its figures so runs compare by machine. */
import { execFileSync } from 'node:child_process'
import { cpus, totalmem } from 'node:os'

export interface Machine {
  cores: number
  cpuModel: string
  memoryGiB: number
  node: string
  temporal: string
}

export function describeMachine (temporalCli: string): Machine {
  return {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    node: process.version,
    temporal: execFileSync(temporalCli, ['--version'], { encoding: 'utf8' }).trim()
  }
}
