/**
 * The stack as a service manager: whatever component dies is started again, its PID file names
 * the new process, and the stack becomes ready again by itself.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startStack, type TestStack } from '../helpers/stack.js'

describe('a component killed with SIGKILL', { timeout: 600_000 }, () => {
  let stack: TestStack

  before(async () => {
    stack = await startStack()
  })
  after(async () => {
    await stack?.stop()
  })

  for (const component of ['worker', 'agent-host-1', 'api', 'postgres', 'temporal']) {
    test(`${component} is restarted, and the stack is ready again`, async () => {
      const killed = await stack.kill(component)
      const restarted = await stack.waitForRestart(component)
      assert.notEqual(restarted, killed)
      await stack.waitForReady()
      const log = await readFile(join(stack.paths.logDir, `${component}.log`), 'utf8')
      assert.match(log, /exited with signal SIGKILL after [\d.]+ s; restarting in 0.3 s/, 'the first restart comes quickly (restart-delay.test.ts has the schedule)')
      assert.match(log, new RegExp(`started \\(pid ${restarted}\\)`))
    })
  }
})
