/**
 * The stack a benchmark runs on: one of its own (launched, and removed afterwards), or a running
 * dev stack (`npm start`) found by its data directory, which is left as it was found.
 */
import { join } from 'node:path'
import { stackPaths } from '../stack/data-dir.js'
import { launchStack } from '../test/helpers/launcher.js'
import { readPidFile } from '../stack/pid-files.js'
import { readStackFile, type StackInfo } from '../stack/stack-file.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'

export interface BenchStack {
  info: StackInfo
  /** The PID of a component: worker, api, agent-<host>. */
  pid: (component: string) => Promise<number>
  /** Removes a stack the benchmark launched; leaves a running one alone. */
  stop: () => Promise<void>
}

export async function benchStack (options: { running: string | undefined, hosts: number, temporal: 'dev' | 'cluster', env: Record<string, string> }): Promise<BenchStack> {
  if (options.running !== undefined) return await attach(options.running)
  const stack = await launchStack({ outputDir: join(REPO_ROOT, 'test-output', 'bench'), hosts: options.hosts, temporal: options.temporal, env: options.env })
  return {
    info: stack.info,
    pid: async (component) => await stack.pid(component),
    stop: async () => { await stack.stop() }
  }
}

async function attach (dataDir: string): Promise<BenchStack> {
  const paths = stackPaths(dataDir)
  const info = await readStackFile(paths.stackFile)
  if (info === null) throw new Error(`no running stack in ${dataDir} (${paths.stackFile} is missing): start one with npm start`)
  return {
    info,
    pid: async (component) => {
      const pid = await readPidFile(paths.runDir, component)
      if (pid === null) throw new Error(`${component} of the stack in ${dataDir} is not running`)
      return pid
    },
    stop: async () => {}
  }
}
