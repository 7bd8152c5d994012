/**
 * Where the repository and its tools are, how a command is found on PATH, and how the tool
 * setup runs one.
 */
import { spawn } from 'node:child_process'
import { constants } from 'node:fs'
import { access } from 'node:fs/promises'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository root: this file runs as `dist/scripts/tools/paths.js`. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** Tools built from source for this checkout (git-ignored). */
export const TOOLS_BIN_DIR = join(REPO_ROOT, '.tools', 'bin')

export async function isExecutable (path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first executable named `command` in `$PATH`, as a shell would find it, or null. */
export async function findOnPath (command: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, command)
    if (await isExecutable(candidate)) return candidate
  }
  return null
}

/** Runs a command with the terminal's output (a build's, an install's progress); rejects unless it exits 0. */
export function run (command: string, args: string[], options: { env?: NodeJS.ProcessEnv, cwd?: string } = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'inherit', 'inherit'] })
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      if (code === 0) resolve()
      else reject(new Error(`${command} ${args.join(' ')} failed with ${signal ?? `exit code ${code}`}`))
    })
  })
}
