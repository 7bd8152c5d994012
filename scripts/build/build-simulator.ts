/**
 * Builds the Cloud Hypervisor simulator (`host-agent/simulator`, Go: the standard library and
 * gVisor's netstack for its guest's network, pinned in its go.mod and go.sum, which the first
 * build downloads through the Go module proxy) into `dist/simulator/cloud-hypervisor`, named
 * like the real program so the driver runs either the same way: one static binary, CGO off.
 * Skips the build when the binary is newer than every simulator source.
 *
 * `node dist/scripts/build/build-simulator.js` (the last step of `npm run build`); tests call
 * `buildSimulator()` so they never run a stale binary.
 */
import { execFile } from 'node:child_process'
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { SIMULATOR_BINARY } from '../../host-agent/cloud-hypervisor/binary.js'

const SIMULATOR_SOURCE = fileURLToPath(new URL('../../../host-agent/simulator', import.meta.url))

async function mtimeMs (path: string): Promise<number | null> {
  try {
    return (await stat(path)).mtimeMs
  } catch {
    return null
  }
}

async function newestSourceMtimeMs (): Promise<number> {
  const entries = await readdir(SIMULATOR_SOURCE, { recursive: true, withFileTypes: true })
  const sources = entries.filter((e) => e.isFile() && /\.go$|^go\.(mod|sum)$/.test(e.name))
  const times = await Promise.all(sources.map((e) => stat(join(e.parentPath, e.name)).then((s) => s.mtimeMs)))
  return Math.max(...times)
}

/** Builds the simulator if it is missing or older than its sources; says whether it built. */
export async function buildSimulator (): Promise<boolean> {
  const binaryMtime = await mtimeMs(SIMULATOR_BINARY)
  if (binaryMtime !== null && binaryMtime > (await newestSourceMtimeMs())) return false
  try {
    await promisify(execFile)('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', SIMULATOR_BINARY, '.'], {
      cwd: SIMULATOR_SOURCE,
      env: { ...process.env, CGO_ENABLED: '0' }
    })
  } catch (err) {
    const { code, stderr } = err as NodeJS.ErrnoException & { stderr?: string }
    if (code === 'ENOENT') throw new Error('building the Cloud Hypervisor simulator needs Go (1.26.3 or newer, as its go.mod says) on PATH')
    throw new Error(`go build of the simulator failed:\n${stderr ?? (err as Error).message}`)
  }
  return true
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const built = await buildSimulator()
  console.log(built ? `built the simulator into ${SIMULATOR_BINARY}` : `simulator is up to date: ${SIMULATOR_BINARY}`)
}
