/**
 * A worker frozen in the middle of a workflow activation, and resumed.
 *
 * The SDK runs each activation in a `vm` context under a watchdog of `isolateExecutionTimeout`,
 * which counts wall-clock time, frozen time included. When the watchdog ends an activation, the
 * task fails; when it does so while the sandbox drains its microtasks, Node itself aborts the
 * process: "async hook stack has become corrupted" (nodejs/node#38503, still open). With the
 * SDK's default of 5 s, a worker frozen (SIGSTOP) for 5 s mid-activation died that way on
 * resume, once in a CI run's campaign test and once in a full campaign; this test saw the same
 * abort every time. vmplane's worker tuning (worker/tuning.ts) sets a longer timeout: a freeze
 * shorter than it must leave the worker running and its task unfailed.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import type { TestWorkflowEnvironment } from '@temporalio/testing'
import { startLocalTemporal } from '../helpers/workflow-environment.js'

const TASK_QUEUE = 'busy'
const BUSY_WORKER = fileURLToPath(new URL('../helpers/busy-worker/worker.js', import.meta.url))
/** Longer than the SDK's default activation timeout (5 s), shorter than vmplane's. */
const FROZEN_MS = 7_000
/** How long the frozen activation works in all, so that the freeze surely lands inside it. */
const BUSY_MS = 3_000
const CALIBRATION_ROUNDS = 1_000

describe('a worker frozen mid-activation', { timeout: 3 * 60_000 }, () => {
  let env: TestWorkflowEnvironment
  let worker: ChildProcess
  let output = ''

  before(async () => {
    env = await startLocalTemporal()
    worker = spawn(process.execPath, [BUSY_WORKER, env.address, TASK_QUEUE], { stdio: ['ignore', 'pipe', 'pipe'] })
    worker.stdout?.on('data', (chunk: Buffer) => { output += chunk.toString() })
    worker.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString() })
    while (!output.includes('ready')) {
      assert.equal(worker.exitCode, null, `the busy worker ended before it polled:\n${output}`)
      await sleep(50)
    }
  })

  after(async () => {
    if (worker?.exitCode === null && worker.signalCode === null) {
      worker.kill('SIGCONT')
      worker.kill('SIGTERM')
      await once(worker, 'exit')
    }
    await env?.teardown()
  })

  it('goes on with the activation when resumed, longer than the SDK\'s default timeout later', async () => {
    const roundsPerMs = CALIBRATION_ROUNDS / await busyFor(CALIBRATION_ROUNDS, 'calibration')
    const rounds = Math.ceil(roundsPerMs * BUSY_MS)
    const handle = await env.client.workflow.start('busyActivation', {
      taskQueue: TASK_QUEUE,
      workflowId: 'frozen-mid-activation',
      args: [rounds],
      // Longer than the freeze and the work together: the server must not time the task out and
      // hand it to the same worker again, which would make the test about something else.
      workflowTaskTimeout: '1 minute'
    })
    await activationStarted(handle.workflowId)
    worker.kill('SIGSTOP')
    try {
      await sleep(FROZEN_MS)
    } finally {
      worker.kill('SIGCONT')
    }
    const ended = once(worker, 'exit').then(() => { throw new Error(`the worker died once resumed:\n${output}`) })
    await Promise.race([handle.result(), ended])
    assert.equal(worker.exitCode, null)
    // Had the watchdog fired, the task would have failed ("Script execution timed out") and run
    // again, when it did not fail Node outright.
    const { events } = await handle.fetchHistory()
    const failedTasks = (events ?? []).flatMap((event) => event.workflowTaskFailedEventAttributes ?? [])
    assert.deepEqual(failedTasks.map((task) => task.failure?.message), [])
  })

  /** Runs the busy workflow for `rounds` rounds, unfrozen, and answers how long it took in ms. */
  async function busyFor (rounds: number, workflowId: string): Promise<number> {
    const started = performance.now()
    await env.client.workflow.execute('busyActivation', { taskQueue: TASK_QUEUE, workflowId, args: [rounds] })
    return Math.max(1, performance.now() - started)
  }

  /** Waits until the worker has picked up the execution's first workflow task. */
  async function activationStarted (workflowId: string): Promise<void> {
    for (;;) {
      const { raw } = await env.client.workflow.getHandle(workflowId).describe()
      if (raw.pendingWorkflowTask?.startedTime != null) return
      await sleep(20)
    }
  }
})
