/**
 * What /proc says about processes. A PID alone does not name a process: PIDs are reused. The
 * agent names a process by its PID and its start time (field 22 of /proc/<pid>/stat, in clock
 * ticks since boot), which a reused PID cannot repeat.
 */
import { execFileSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, readSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { setImmediate as yieldToLoop } from 'node:timers/promises'

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

/**
 * Read synchronously into the scan's one buffer, grown when a command line fills it. /proc is
 * in memory, so a read never waits on a disk: a scan of 2,000 processes takes about 90 ms of
 * CPU (in slices, `SCAN_SLICE`), where `readFile` (four trips to libuv's pool a file, and a
 * 64 KiB buffer each, since a /proc file's size reads 0) took 350 ms and made so much external
 * memory that V8 ran a dozen full collections after each of the reconciler's scans.
 */
function commandLineOf (pid: number, scratch: { buffer: Buffer }): string[] | null {
  let length = 0
  let fd: number
  try {
    fd = openSync(`/proc/${pid}/cmdline`, 'r')
  } catch {
    return null
  }
  try {
    for (;;) {
      if (length === scratch.buffer.length) scratch.buffer = Buffer.concat([scratch.buffer, Buffer.alloc(length)])
      const bytesRead = readSync(fd, scratch.buffer, length, scratch.buffer.length - length, length)
      if (bytesRead === 0) break
      length += bytesRead
    }
  } catch {
    return null
  } finally {
    closeSync(fd)
  }
  const raw = scratch.buffer.toString('utf8', 0, length)
  return raw.split('\0').filter((arg, i, all) => i < all.length - 1 || arg !== '')
}

/** Processes read between two turns of the event loop, so that a long scan never stalls the agent. */
const SCAN_SLICE = 250

export interface RunningProcess extends ProcessIdentity {
  argv: string[]
}

/** Every live process whose command line `select` accepts. */
export async function findProcesses (select: (argv: string[]) => boolean): Promise<RunningProcess[]> {
  const found: RunningProcess[] = []
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number)
  const scratch = { buffer: Buffer.alloc(4096) }
  for (const [i, pid] of pids.entries()) {
    if (i % SCAN_SLICE === SCAN_SLICE - 1) await yieldToLoop()
    const argv = commandLineOf(pid, scratch)
    if (argv === null || !select(argv)) continue
    const startTime = startTimeOf(pid)
    if (startTime !== null) found.push({ pid, startTime, argv })
  }
  return found
}
