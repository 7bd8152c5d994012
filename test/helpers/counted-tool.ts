/**
 * A host tool the code under test runs, counted: a shim of the same name, first on PATH, that
 * notes each run's arguments and then runs the real tool with them (its standard input too).
 * Tests that hold the code to how many processes it spawns use it: each spawn is CPU the agent
 * pays on every boot.
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises'
import { delimiter, join } from 'node:path'
import { runCommand } from '../../host-agent/process/command.js'

export interface CountedTool {
  /** The arguments of each run since the last `reset`, in order. */
  runs: () => Promise<string[]>
  reset: () => Promise<void>
  /** Puts PATH back as it was. */
  restore: () => void
}

export async function countRuns (tool: string, dir: string): Promise<CountedTool> {
  const shims = join(dir, 'bin')
  const log = join(dir, `${tool}-runs`)
  await mkdir(shims, { recursive: true })
  const real = (await runCommand('sh', ['-c', `command -v ${tool}`])).trim()
  await writeFile(join(shims, tool), `#!/bin/sh\necho "$*" >> '${log}'\nexec '${real}' "$@"\n`)
  await chmod(join(shims, tool), 0o755)
  await writeFile(log, '')
  const path = process.env.PATH
  process.env.PATH = `${shims}${delimiter}${path}`
  return {
    runs: async () => (await readFile(log, 'utf8')).split('\n').filter((line) => line !== ''),
    reset: async () => { await writeFile(log, '') },
    restore: () => { process.env.PATH = path }
  }
}
