/**
 * A request that reaches an instance's execution while its last workflow task still runs (I5).
 *
 * A client that sends a delete as soon as its stop's `?wait=` answers does just that: the stop's
 * outcome is in PostgreSQL before the task that wrote it has ended. Here the worker is frozen
 * (SIGSTOP, faults/crash-points.ts) right after it recorded the stop as done, the delete is sent
 * meanwhile, and the worker is resumed. The delete must destroy the instance. Before the fix,
 * the task went on to end the execution, the server refused that because of the delete, and the
 * task, retried with the delete, took the delete's path through the event IDs of the writes it
 * had already made: its writes were dropped as repeats, and the instance stayed `stopped` with
 * the delete recorded `succeeded` (found by npm run bench).
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { armCrashPlan, crashPlanFired } from '../helpers/crash-plans.js'
import { runningInstanceAtRest, waitForState } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

/** Longer than a workflow task's timeout (3 s): the frozen task times out and runs again, with the delete. */
const FROZEN_MS = 5_000

describe('a delete that arrives while the stop that preceded it ends', { timeout: 5 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 1, env: { VMPLANE_CRASH_POINTS: '1' } }) })
  after(async () => { await stack?.stop() })

  it('destroys the instance, and records the delete succeeded only then', async () => {
    const { id } = await runningInstanceAtRest(stack, 'end-race', 'sim.shutdown_ms=0')
    await armCrashPlan(stack, { point: 'change.after-commit', kill: 'worker', signal: 'SIGSTOP', when: 'operation-finished' })
    assert.equal((await api(stack).post(`/v1/instances/${id}/stop`, { graceSeconds: 5 })).status, 202)
    await crashPlanFired(stack, 'the worker frozen once the stop is recorded', 30_000)
    const worker = await stack.pid('worker')
    let deleteOperation: string
    try {
      const stopped = await api(stack).get(`/v1/instances/${id}`)
      assert.equal(stopped.body.state, 'stopped')
      const deleted = await api(stack).delete(`/v1/instances/${id}?graceSeconds=0`)
      assert.equal(deleted.status, 202, JSON.stringify(deleted.body))
      deleteOperation = deleted.body.operation.id
      await sleep(FROZEN_MS)
    } finally {
      process.kill(worker, 'SIGCONT')
    }
    const destroyed = await waitForState(stack, id, 'destroyed')
    assert.equal(destroyed.intendedState, 'destroyed')
    const { body: operation } = await api(stack).get(`/v1/operations/${deleteOperation}`)
    assert.equal(operation.status, 'succeeded')
  })
})
