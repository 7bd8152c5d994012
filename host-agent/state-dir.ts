/**
 * The agent's state directory: checked and claimed before anything else runs.
 *
 * - Unix socket paths are limited to 107 bytes, and every VMM's API socket lives at
 *   `<stateDir>/vmms/<uuid>/api.sock`; a state directory too long for that is refused at start-up
 *   rather than failing on the first VMM.
 * - Two agents on one state directory would each kill the other's VMMs as strays: the directory
 *   is claimed with a PID file naming this process by PID and start time, and a start-up finding
 *   a live owner stops.
 */
import { constants } from 'node:fs'
import { access, mkdir, readFile, rm } from 'node:fs/promises'
import { delimiter, join } from 'node:path'
import { isRunning, startTimeOf, type ProcessIdentity } from './process/proc.js'
import { writeFileAtomic } from './store/record-store.js'

const MAX_SOCKET_PATH_BYTES = 107
const SOCKET_SUFFIX = '/vmms/00000000-0000-0000-0000-000000000000/api.sock'
const PID_FILE = 'agent.pid'

export class StartupError extends Error {
  override name = 'StartupError'
}

export async function claimStateDir (stateDir: string): Promise<() => Promise<void>> {
  const longest = Buffer.byteLength(stateDir + SOCKET_SUFFIX)
  if (longest > MAX_SOCKET_PATH_BYTES) {
    throw new StartupError(`VMPLANE_AGENT_STATE_DIR is too long: VMM sockets under it would take ${longest} bytes, ` +
      `more than the ${MAX_SOCKET_PATH_BYTES} a Unix socket path may have; use a directory of at most ` +
      `${MAX_SOCKET_PATH_BYTES - Buffer.byteLength(SOCKET_SUFFIX)} bytes`)
  }
  await mkdir(stateDir, { recursive: true, mode: 0o700 })
  const owner = await readOwner(stateDir)
  if (owner !== null && owner.pid !== process.pid && isRunning(owner)) {
    throw new StartupError(`another agent (pid ${owner.pid}) is running on ${stateDir}`)
  }
  const self: ProcessIdentity = { pid: process.pid, startTime: startTimeOf(process.pid) ?? '' }
  await writeFileAtomic(stateDir, PID_FILE, JSON.stringify(self) + '\n')
  return async () => {
    const current = await readOwner(stateDir)
    if (current?.pid === self.pid) await rm(join(stateDir, PID_FILE), { force: true })
  }
}

async function readOwner (stateDir: string): Promise<ProcessIdentity | null> {
  try {
    const parsed = JSON.parse(await readFile(join(stateDir, PID_FILE), 'utf8')) as Partial<ProcessIdentity>
    return typeof parsed.pid === 'number' && typeof parsed.startTime === 'string'
      ? { pid: parsed.pid, startTime: parsed.startTime }
      : null
  } catch {
    return null
  }
}

/** Resolves the cloud-hypervisor program like the shell-less spawn will, and checks it runs. */
export async function findExecutable (program: string): Promise<string> {
  const candidates = program.includes('/')
    ? [program]
    : (process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== '').map((dir) => join(dir, program))
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not here; try the next one.
    }
  }
  throw new StartupError(`cannot find an executable ${program} (VMPLANE_CLOUD_HYPERVISOR)`)
}
