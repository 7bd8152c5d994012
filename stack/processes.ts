/**
 * Looking at processes that are not (or no longer) this process's children, through /proc:
 * leftovers of a stack that was killed, and the VMM processes that host agents start in
 * sessions of their own so that they outlive the control plane.
 */
import { readdir, readFile, readlink } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'

/** True while `pid` is a live process; a zombie (exited, not yet reaped) counts as gone. */
export async function isRunning (pid: number): Promise<boolean> {
  const stat = await processStat(pid)
  return stat !== null && stat.state !== 'Z'
}

/** A process's state letter and process group, from /proc/<pid>/stat; null once it is gone. */
async function processStat (pid: number): Promise<{ state: string, group: number } | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
    // The fields after the command name, which is in parentheses and may itself hold spaces:
    // state, parent, process group, …
    const [state, , group] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state, group: Number(group) }
  } catch {
    return null
  }
}

async function readNulSeparated (path: string): Promise<string[] | null> {
  try {
    return (await readFile(path, 'utf8')).split('\0').filter((s) => s !== '')
  } catch {
    return null
  }
}

/** The environment a process started with, as `NAME=value` entries, or null if it is gone. */
export function processEnvironment (pid: number): Promise<string[] | null> {
  return readNulSeparated(`/proc/${pid}/environ`)
}

/** The arguments a process was started with, or null if it is gone. */
export function processCommandLine (pid: number): Promise<string[] | null> {
  return readNulSeparated(`/proc/${pid}/cmdline`)
}

/** Every process on this machine, by PID. */
export async function allPids (): Promise<number[]> {
  const entries = await readdir('/proc')
  return entries.filter((name) => /^\d+$/.test(name)).map(Number)
}

/**
 * Kills every live process of process group `group`, and every one whose working directory is
 * `workDir` (resolved) when one is given, and resolves once none is left, or after `timeoutMs`
 * whatever still runs.
 */
export async function killLeftovers (leftovers: { group: number, workDir: string | null }, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const left = await liveProcesses(leftovers)
    if (left.length === 0 || Date.now() >= deadline) return
    for (const pid of left) signalProcess(pid, 'SIGKILL')
    await sleep(20)
  }
}

async function liveProcesses ({ group, workDir }: { group: number, workDir: string | null }): Promise<number[]> {
  const picked: number[] = []
  for (const pid of await allPids()) {
    if (pid === process.pid) continue
    const stat = await processStat(pid)
    if (stat === null || stat.state === 'Z') continue
    // The working directory is read only where the group does not settle it.
    if (stat.group === group || (workDir !== null && await readlink(`/proc/${pid}/cwd`).catch(() => null) === workDir)) picked.push(pid)
  }
  return picked
}

/**
 * Every live VMM process (cloud-hypervisor or the simulator) whose API socket is inside
 * `dataDir`: the host agents put each VMM's socket in their state directory, so this finds the
 * VMMs of one stack and no other, whether or not an agent is running.
 */
export async function findVmmProcesses (dataDir: string): Promise<number[]> {
  const prefix = `${dataDir.replace(/\/$/, '')}/`
  const found: number[] = []
  for (const pid of await allPids()) {
    const argv = await processCommandLine(pid)
    if (argv === null) continue
    if (apiSocketOf(argv)?.includes(prefix) === true && await isRunning(pid)) found.push(pid)
  }
  return found
}

/** The value of `--api-socket` (`--api-socket path=…` or `--api-socket=path=…`), or null. */
function apiSocketOf (argv: string[]): string | null {
  const at = argv.findIndex((arg) => arg === '--api-socket' || arg.startsWith('--api-socket='))
  if (at === -1) return null
  return argv[at] === '--api-socket' ? argv[at + 1] ?? null : argv[at].slice('--api-socket='.length)
}

/** Waits until `pid` is gone; false if it still runs after `timeoutMs`. */
export async function waitForExit (pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (await isRunning(pid)) {
    if (Date.now() >= deadline) return false
    await sleep(50)
  }
  return true
}

/** Sends `signal` to `pid` if it still exists; false if it did not. */
export function signalProcess (pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false
    throw error
  }
}

/** SIGTERM, then SIGKILL for whatever still runs after `graceMs`; resolves once all are gone. */
export async function terminate (pids: readonly number[], graceMs: number): Promise<void> {
  for (const pid of pids) signalProcess(pid, 'SIGTERM')
  await Promise.all(pids.map(async (pid) => {
    if (await waitForExit(pid, graceMs)) return
    signalProcess(pid, 'SIGKILL')
    await waitForExit(pid, graceMs)
  }))
}
