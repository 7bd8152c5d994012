/**
 * The operator's tools, run for real against a test stack: the Temporal CLI (`temporal`, from
 * TEMPORAL_CLI or PATH, as npm test provides it) and `tctl` (on PATH).
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type { TestStack } from './stack.js'

const run = promisify(execFile)

export async function temporalCli (stack: TestStack, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.env.TEMPORAL_CLI ?? 'temporal', [
    ...args, '--address', stack.info.temporalAddress, '--namespace', stack.info.namespace
  ])
  return stdout
}

export async function tctl (stack: TestStack, ...args: string[]): Promise<string> {
  const { stdout } = await run('tctl', ['--address', stack.info.temporalAddress, '--namespace', stack.info.namespace, ...args])
  return stdout
}
