/**
 * A whole vmplane stack per test file (test/helpers/launcher.ts), its logs kept in
 * test-output/stacks/<name>/. Call `stop()` in an `after` hook.
 *
 *   let stack: TestStack
 *   before(async () => { stack = await startStack() })
 *   after(async () => { await stack?.stop() })
 */
import { join } from 'node:path'
import { launchStack, type LaunchedStack, type StackOptions } from './launcher.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

export { api, freePorts, type ApiResponse } from './launcher.js'
export type TestStack = LaunchedStack

/**
 * The test stacks' storage is sparse files (each instance's 3 GiB take a few hundred KiB), so
 * it is given room for every instance a test file makes rather than the filesystem's size.
 */
const TEST_STACK_ENV = { VMPLANE_STORAGE_GIB: '100000' }

export async function startStack (options: Omit<StackOptions, 'outputDir'> = {}): Promise<TestStack> {
  return await launchStack({ ...options, env: { ...TEST_STACK_ENV, ...options.env }, outputDir: join(REPO_ROOT, 'test-output', 'stacks') })
}
