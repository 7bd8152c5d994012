/**
 * Executions whose histories grow long (issue 25), fast: a stop that waits on a host that does not
 * answer waits on when a series of attempts of its calls runs out of time, continues
 * as a new execution once its history is long, carrying its halts, and ends once the host answers; and each series of attempts of a call is twice as long as the one before, so
 * a wait of days costs a history little.
 */
import assert from 'node:assert/strict'
import { ApplicationFailure } from '@temporalio/activity'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { StopRequest } from '../../domain/requests.js'
import { haltRequestedSignal } from '../../contract/messages.js'
import { seriesTimeoutMs } from '../../workflows/activity-proxies.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { requestBase, TEST_SETTINGS, until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'long-histories-test'

describe('long histories (workflow logic)', { timeout: 180_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld

  // A halt continues as new once its history reaches 40 events and its run added 40 while the halt
  // waited.
  before(async () => {
    ({ driver, world } = await startInstanceDriver(TASK_QUEUE))
    world.settings = { ...TEST_SETTINGS, history: { continueAsNewAfterEvents: 40, minGrowthEvents: 40 } }
  })
  after(async () => { await driver?.stop() })

  it('a stop waits on a host that does not answer past its calls\' first series, continues as new once its history is long, and ends once the host answers', async () => {
    const instanceId = await driver.running()
    world.unreachableHosts.add('host-1')
    const stop: StopRequest = { ...requestBase(instanceId), kind: 'stop', graceSeconds: 1 }
    const handle = await driver.halt(stop)
    // More stops pile in while it waits, as a flood would: each an event of the history.
    const more: StopRequest[] = Array.from({ length: 20 }, () => ({ ...requestBase(instanceId), kind: 'stop', graceSeconds: 1 }))
    for (const request of more) {
      await handle.signal(haltRequestedSignal, request)
      await sleep(100)
    }
    const firstRun = driver.client.workflow.getHandle(handle.workflowId, handle.signaledRunId, { followRuns: false })
    await assert.rejects(firstRun.result(), { name: 'WorkflowExecutionContinuedAsNewError' }, 'the waiting halt continued as new')
    world.unreachableHosts.delete('host-1')
    for (const request of [stop, ...more]) await until(`stop ${request.operationId} ended`, () => world.operations.get(request.operationId)?.status === 'succeeded', 30_000)
    assert.equal(world.instances.get(instanceId)!.state, 'stopped')
    const { type } = await driver.client.workflow.getHandle(handle.workflowId).describe()
    assert.equal(type, 'stopInstance')
  })

  it('a stop waits on past a series of attempts that runs out of time, and ends once the host answers', async () => {
    const instanceId = await driver.running()
    // The kill's first series ends at once: its only attempt asks for a retry later than the
    // series' schedule-to-close allows, so Temporal ends it with the retry state TIMEOUT, as it
    // ends any series whose next attempt would begin past its deadline (a host away 2 minutes).
    let kills = 0
    world.agent.destroyVmm = (vmm) => {
      if (++kills === 1) throw ApplicationFailure.create({ message: 'host-1: connect ECONNREFUSED', type: 'HostUnreachable', nextRetryDelay: '10 minutes' })
      return world.report(vmm, 'destroyed', { cause: 'killed', code: null, signal: 'SIGKILL' })
    }
    try {
      const stop: StopRequest = { ...requestBase(instanceId), kind: 'stop', graceSeconds: 0 }
      const handle = await driver.halt(stop)
      await until('the stop ended', () => world.operations.get(stop.operationId)?.status === 'succeeded', 60_000)
      assert.equal(world.instances.get(instanceId)!.state, 'stopped')
      assert.equal(kills, 2, 'the kill was tried again after the series that ran out')
      await handle.result()
    } finally {
      world.agent.destroyVmm = (vmm) => world.report(vmm, 'destroyed', { cause: 'killed', code: null, signal: 'SIGKILL' })
    }
  })

  it('each series of attempts of a call is twice as long as the one before, from 2 minutes up to 6 hours', () => {
    assert.deepEqual([0, 1, 2, 7, 8, 40].map((series) => seriesTimeoutMs(series) / 60_000), [2, 4, 8, 256, 360, 360])
  })
})
