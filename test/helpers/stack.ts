/**
 * A whole vmplane stack per test file (scripts/dev-stack/launcher.ts), its logs kept in
 * test-output/stacks/<name>/. Call `stop()` in an `after` hook.
 *
 *   let stack: TestStack
 *   before(async () => { stack = await startStack() })
 *   after(async () => { await stack?.stop() })
 */
import { join } from 'node:path'
import { launchStack, type LaunchedStack, type StackOptions } from '../../scripts/dev-stack/launcher.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

export { api, freePorts, type ApiResponse, type ComponentName } from '../../scripts/dev-stack/launcher.js'
export type TestStack = LaunchedStack

export async function startStack (options: Omit<StackOptions, 'outputDir'> = {}): Promise<TestStack> {
  return await launchStack({ ...options, outputDir: join(REPO_ROOT, 'test-output', 'stacks') })
}
