/**
 * libfaketime, Debian's `libfaketime` package: a library loaded with LD_PRELOAD that shifts the
 * time a process reads, so a test can run a host agent whose clock is not the control plane's
 * (test/host-agent/helpers/agent.ts, `clockOffsetSeconds`).
 *
 * `findLibfaketime()` only looks; `ensureLibfaketime()`, which `npm test` calls before the tests,
 * installs the package with apt-get when it is missing.
 */
import { constants } from 'node:fs'
import { access, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { ensureDebianProgram } from './debian-packages.js'

/** Debian puts it in its architecture's directory: /usr/lib/x86_64-linux-gnu/faketime/…. */
const LIB_DIR = '/usr/lib'
const LIBRARY = join('faketime', 'libfaketime.so.1')

export async function findLibfaketime (): Promise<string | null> {
  const dirs = await readdir(LIB_DIR, { withFileTypes: true })
  for (const dir of dirs.filter((entry) => entry.isDirectory())) {
    const library = join(LIB_DIR, dir.name, LIBRARY)
    if (await access(library, constants.R_OK).then(() => true, () => false)) return library
  }
  return null
}

export async function ensureLibfaketime (options: { log: (message: string) => void }): Promise<string> {
  return await ensureDebianProgram(findLibfaketime, 'libfaketime', 'libfaketime', options.log)
}
