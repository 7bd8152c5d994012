/**
 * What /proc says about processes. A PID alone does not name a process: PIDs are reused. The
 * agent names a process by its PID and its start time (field 22 of /proc/<pid>/stat, in clock
 * ticks since boot), which a reused PID cannot repeat.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'

export interface ProcessIdentity {
  pid: number
  startTime: string
}

interface ProcStat {
  state: string
  startTime: string
}

function parseStat (text: string): ProcStat | null {
  // The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // After the name: field 3 (state) is fields[0], so field 22 (starttime) is fields[19].
  const state = fields[0]
  const startTime = fields[19]
  return state === undefined || startTime === undefined ? null : { state, startTime }
}

function readStatSync (pid: number): ProcStat | null {
  try {
    return parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return null
  }
}

/** The start time of a live process, or null when there is none (zombies count as gone). */
export function startTimeOf (pid: number): string | null {
  const stat = readStatSync(pid)
  if (stat === null || stat.state === 'Z' || stat.state === 'X') return null
  return stat.startTime
}

/** The kernel's clock ticks per second, the unit of a start time. */
export const CLOCK_TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())

/** When a process started, as wall-clock time: the boot time plus its start time. */
export function startedAt (startTime: string): Date {
  const bootSeconds = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1])
  return new Date((bootSeconds + Number(startTime) / CLOCK_TICKS_PER_SECOND) * 1000)
}

/** Whether this exact process (PID and start time) still runs. */
export function isRunning (identity: ProcessIdentity): boolean {
  return startTimeOf(identity.pid) === identity.startTime
}

async function commandLineOf (pid: number): Promise<string[] | null> {
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8')
    return raw.split('\0').filter((arg, i, all) => i < all.length - 1 || arg !== '')
  } catch {
    return null
  }
}

export interface RunningProcess extends ProcessIdentity {
  argv: string[]
}

/** Every live process whose command line `select` accepts. */
export async function findProcesses (select: (argv: string[]) => boolean): Promise<RunningProcess[]> {
  const found: RunningProcess[] = []
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number)
  for (const pid of pids) {
    const argv = await commandLineOf(pid)
    if (argv === null || !select(argv)) continue
    const startTime = startTimeOf(pid)
    if (startTime !== null) found.push({ pid, startTime, argv })
  }
  return found
}
