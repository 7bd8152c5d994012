/**
 * CPU time per operation of each component, read from /proc around a phase of a benchmark: a
 * process's own user and system time, what its reaped children used, and its live children's, so
 * that PostgreSQL's backends and a host agent's VMM processes count towards their component.
 */
import { readdir, readFile } from 'node:fs/promises'
import { CLOCK_TICKS_PER_SECOND } from '../host-agent/process/proc.js'

/** CPU seconds of a process and all its descendants, dead (reaped) and alive; 0 if it is gone. */
async function treeCpuSeconds (pid: number): Promise<number> {
  let stat: string
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return 0
  }
  // Fields after the command name (in parentheses): utime, stime, cutime, cstime are the 12th to 15th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const own = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) / CLOCK_TICKS_PER_SECOND
  const children = await readdir(`/proc/${pid}/task`).then(
    async (tasks) => (await Promise.all(tasks.map(async (task) => await readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => '')))).join(' '),
    () => ''
  )
  const pids = children.split(/\s+/).filter((p) => p !== '').map(Number)
  return own + (await Promise.all(pids.map(treeCpuSeconds))).reduce((a, b) => a + b, 0)
}

/** Measures `phase`, which performs `operations` operations: CPU ms per operation of each component. */
export async function cpuPerOperation (components: Record<string, number>, operations: number, phase: () => Promise<unknown>): Promise<Record<string, number>> {
  const read = async (): Promise<Record<string, number>> =>
    Object.fromEntries(await Promise.all(Object.entries(components).map(async ([name, pid]) => [name, await treeCpuSeconds(pid)] as const)))
  const before = await read()
  await phase()
  const after = await read()
  return Object.fromEntries(Object.keys(components).map((name) => [name, Math.round((after[name]! - before[name]!) * 1000 / operations * 10) / 10]))
}
