/**
 * A host's drain (workflows/drain-host.ts) continuing as new, in the fast layer: a dev server that
 * suggests continuing as new after a few events, so every round of a drain ends a run. Its state
 * carries over, and a stop that arrives in the round that would continue as new ends the drain
 * `stopped` rather than being dropped with the run.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { stopDrainSignal } from '../../contract/messages.js'
import { DrainWorld, newHostId, startDrain } from '../helpers/drain-world.js'
import { startWorkerEnvironment, type WorkerEnvironment } from '../helpers/workflow-environment.js'
import { until } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'drain-continue-as-new-test'
/** Rounds are 2 s apart: a few rounds, and then some. */
const ROUNDS_TIMEOUT_MS = 15_000

describe('host drains continuing as new (workflow logic)', { timeout: 120_000 }, () => {
  const world = new DrainWorld()
  let env: WorkerEnvironment
  // Temporal suggests continuing as new after 10 events: every round of a drain but its first task.
  before(async () => { env = await startWorkerEnvironment(TASK_QUEUE, world.activities(), ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=10']) })
  after(async () => { await env?.stop() })

  it('continues as new when Temporal suggests it, carrying the migrations it asked for', async () => {
    const drained = newHostId()
    const instanceId = world.addInstance(drained)
    const { handle } = await startDrain(env.client, TASK_QUEUE, drained)
    try {
      const firstRun = env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId, { followRuns: false })
      await assert.rejects(firstRun.result(), { name: 'WorkflowExecutionContinuedAsNewError' })
      await until('the next run looks at the host', () => (world.looks.get(drained) ?? 0) >= 3, ROUNDS_TIMEOUT_MS)
      assert.equal(world.migrationsAsked.filter((r) => r.instanceId === instanceId).length, 1)
    } finally {
      await handle.terminate('the test is done')
    }
  })

  it('ends stopped when stopDrain arrives in the round that continues as new', async () => {
    const drained = newHostId()
    world.addInstance(drained)
    // The round's last activity (its progress) is held while the stop arrives.
    let release!: () => void
    const held = new Promise<void>((resolve) => { release = resolve })
    let holding = false
    world.beforeProgress = async (hostId) => {
      if (hostId !== drained || holding) return
      holding = true
      await held
    }
    const { input, handle } = await startDrain(env.client, TASK_QUEUE, drained)
    try {
      await until('the drain records its first progress', () => holding, ROUNDS_TIMEOUT_MS)
      // Recorded once signal() returns: before the round's progress is.
      await handle.signal(stopDrainSignal)
      release()

      const firstRun = env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId, { followRuns: false })
      assert.equal(await firstRun.result(), 'stopped')
      assert.equal(world.lastProgress(input.drainId)?.status, 'stopped')
      // The premise: Temporal suggested continuing as new in every task after the stop.
      const events = (await firstRun.fetchHistory()).events!
      const tasksAfterStop = events.slice(events.findIndex((e) => e.workflowExecutionSignaledEventAttributes != null))
        .filter((e) => e.workflowTaskStartedEventAttributes != null)
      assert.notDeepEqual(tasksAfterStop, [])
      assert.ok(tasksAfterStop.every((e) => e.workflowTaskStartedEventAttributes!.suggestContinueAsNew === true), 'a task after the stop was not suggested to continue as new')
    } finally {
      world.beforeProgress = async () => {}
      release()
      await handle.terminate('the test is done').catch(() => {})
    }
  })
})
