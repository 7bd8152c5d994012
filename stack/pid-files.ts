/**
 * `run/<component>.pid` holds the current PID of every component, rewritten on each restart
 * and removed when the process exits, so whoever reads one (an operator, a fault test) never
 * signals a PID that has been recycled by now. `run/dev-stack.pid` is the stack's own and marks
 * the data directory as taken.
 */
import { rmSync, writeFileSync } from 'node:fs'
import { mkdir, readdir, readFile, rm } from 'node:fs/promises'
import { pidFile } from './data-dir.js'
import { isRunning, processCommandLine, processEnvironment, terminate } from './processes.js'

const STACK_PID_NAME = 'dev-stack'
const LEFTOVER_GRACE_MS = 5000

/**
 * Every component runs with this variable naming its stack's data directory: it is how a
 * restarted stack recognises the processes of the one before it.
 */
export const DATA_DIR_MARK = 'VMPLANE_DATA_DIR'

// Written and removed synchronously: a process can exit before an asynchronous write of its
// PID file has landed, and the file must not outlive it.
export function writePidFile (runDir: string, name: string, pid: number): void {
  writeFileSync(pidFile(runDir, name), `${pid}\n`)
}

export function removePidFile (runDir: string, name: string): void {
  rmSync(pidFile(runDir, name), { force: true })
}

export async function readPidFile (runDir: string, name: string): Promise<number | null> {
  try {
    const pid = Number.parseInt(await readFile(pidFile(runDir, name), 'utf8'), 10)
    return Number.isInteger(pid) && pid > 0 ? pid : null
  } catch {
    return null
  }
}

/**
 * Takes the data directory for this process. Another live stack on it is an error. A stack
 * that was killed (SIGKILL, a crash) could not stop its components, which run in process
 * groups of their own: those still alive would hold the ports and the PostgreSQL lock, so they
 * are stopped here, but only those whose environment names this data directory.
 */
export async function claimDataDir (dataDir: string, runDir: string, log: (message: string) => void): Promise<void> {
  await mkdir(runDir, { recursive: true })
  const holder = await readPidFile(runDir, STACK_PID_NAME)
  if (holder !== null && holder !== process.pid && await isDevStack(holder)) {
    throw new Error(`another dev stack (pid ${holder}) is running on ${dataDir}`)
  }
  const leftovers = await findLeftovers(dataDir, runDir)
  if (leftovers.length > 0) {
    log(`stopping ${leftovers.length} process(es) left running by a stack that did not stop cleanly`)
    await terminate(leftovers, LEFTOVER_GRACE_MS)
  }
  // What run/ holds describes the stack that is running; from here on that is this one.
  await rm(runDir, { recursive: true, force: true })
  await mkdir(runDir, { recursive: true })
  writePidFile(runDir, STACK_PID_NAME, process.pid)
}

/** Whether `pid` runs a dev stack: a PID that some other program has been given since does not count. */
export async function isDevStack (pid: number): Promise<boolean> {
  return (await processCommandLine(pid))?.some((arg) => arg.endsWith('dev-stack.js')) === true
}

export function releaseDataDir (runDir: string): void {
  removePidFile(runDir, STACK_PID_NAME)
}

/** Every PID file in run/, by component name (the stack's own included). */
export async function readPidFiles (runDir: string): Promise<Map<string, number>> {
  const pids = new Map<string, number>()
  for (const file of await readdir(runDir).catch(() => [])) {
    if (!file.endsWith('.pid')) continue
    const name = file.slice(0, -'.pid'.length)
    const pid = await readPidFile(runDir, name)
    if (pid !== null) pids.set(name, pid)
  }
  return pids
}

async function findLeftovers (dataDir: string, runDir: string): Promise<number[]> {
  const mark = `${DATA_DIR_MARK}=${dataDir}`
  const leftovers: number[] = []
  for (const [name, pid] of await readPidFiles(runDir)) {
    if (name === STACK_PID_NAME || !await isRunning(pid)) continue
    if ((await processEnvironment(pid))?.includes(mark) === true) leftovers.push(pid)
  }
  return leftovers
}
