/**
 * What an instance becomes when its VMM ends by itself, and its restart (workflows/auto-restart.ts,
 * `settle` in workflows/execution.ts), fast: the real workflow code on the SDK's test server, the
 * agents' reports played by the in-memory world. A crash under restart policy `on-failure` fails
 * the instance with its restart planned, and the instance restarts by itself when the time comes,
 * as a start of its own; a stop meanwhile cancels the restart; a crash under `never` leaves it
 * failed; a guest that powers itself off ends stopped and is not restarted. The back-off's
 * arithmetic is `planRestart`'s (test/unit/domain/instance-rules.test.ts), the `RestartBackoff`
 * condition `conditionsOf`'s (test/unit/domain/conditions.test.ts); a crash and a power-off of
 * real VMMs, as their agent tells them, test/integration/unknown-is-not-dead.test.ts.
 */
import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { Instance } from '../../domain/instance.js'
import type { NewInstance } from '../../domain/requests.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { newInstanceSpec, requestBase, TEST_SETTINGS, until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'auto-restart-test'
const CRASH = { cause: 'crashed' as const, code: 1, signal: null }

describe('a VMM that ends by itself, and auto-restart (workflow logic)', { timeout: 120_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld
  before(async () => { ({ driver, world } = await startInstanceDriver(TASK_QUEUE)) })
  after(async () => { await driver?.stop() })
  beforeEach(() => { world.settings = { ...TEST_SETTINGS, restartBackoffMs: 1000 } })

  function spec (restartPolicy: NewInstance['restartPolicy']): NewInstance {
    return { ...newInstanceSpec(), restartPolicy }
  }

  const instance = (id: string): Instance => world.instances.get(id)!
  const vmmsOf = (id: string): string[] => [...world.vmms.values()].filter((v) => v.instanceId === id).map((v) => v.id)
  const messagesOf = (id: string): string[] => world.events.filter((e) => e.instanceId === id).map((e) => e.message)

  /** The running instance's VMM ends, as its agent reports it. */
  async function vmmEnds (instanceId: string, exit: typeof CRASH | { cause: 'guest-poweroff', code: 0, signal: null }): Promise<string> {
    const vmmId = instance(instanceId).activeVmmId!
    await driver.deliver(world.vmms.get(vmmId)!, exit.cause === 'crashed' ? 'failed' : 'destroyed', exit)
    return vmmId
  }

  /** Waits for a VMM of the instance other than `others` to be ensured, and reports it running: its ID. */
  async function restartRuns (instanceId: string, others: string[]): Promise<string> {
    await until('a fresh VMM is ensured', () => vmmsOf(instanceId).some((id) => !others.includes(id) && driver.called('ensureVmm', id)))
    const fresh = vmmsOf(instanceId).find((id) => !others.includes(id))!
    await driver.deliver(world.vmms.get(fresh)!, 'running')
    await until('the instance runs again', () => instance(instanceId).state === 'running' && instance(instanceId).activeVmmId === fresh)
    return fresh
  }

  it('restarts a crashed instance under on-failure by itself after its back-off, as a start of its own on a fresh VMM, the back-off doubling with each crash in a row', async () => {
    const instanceId = await driver.running(spec('on-failure'))
    const first = await vmmEnds(instanceId, CRASH)
    const second = await restartRuns(instanceId, [first])
    assert.deepEqual([instance(instanceId).restartAt, instance(instanceId).lastError, instance(instanceId).restartAttempts], [null, null, 1])
    const { type } = await driver.client.workflow.getHandle(`instance-${instanceId}`).describe()
    assert.equal(type, 'startInstance', 'the restart runs as an execution of its own')

    await vmmEnds(instanceId, CRASH)
    const third = await restartRuns(instanceId, [first, second])
    assert.equal(instance(instanceId).restartAttempts, 2)
    const messages = messagesOf(instanceId)
    const planned = messages.filter((m) => m.startsWith('VMM exited with code 1; restarting in'))
    assert.deepEqual(planned, [
      'VMM exited with code 1; restarting in 1 s (restart policy on-failure, attempt 1)',
      'VMM exited with code 1; restarting in 2 s (restart policy on-failure, attempt 2)'
    ], messages.join('\n'))
    for (const attempt of [1, 2]) assert.ok(messages.includes(`restarting by itself (attempt ${attempt})`), messages.join('\n'))
    assert.equal(new Set([first, second, third]).size, 3, 'each restart is a fresh VMM')
  })

  it('a stop while a failed instance waits to restart cancels the restart', async () => {
    world.settings = { ...TEST_SETTINGS, restartBackoffMs: 60_000 }
    const instanceId = await driver.running(spec('on-failure'))
    await vmmEnds(instanceId, CRASH)
    await until('the restart is planned', () => instance(instanceId).state === 'failed' && instance(instanceId).restartAt !== null)
    const stop = { ...requestBase(instanceId), kind: 'stop' as const, graceSeconds: 0 }
    await driver.halt(stop)
    await driver.ended(stop.operationId)
    assert.deepEqual([instance(instanceId).state, instance(instanceId).intendedState, instance(instanceId).restartAt], ['stopped', 'stopped', null])
    assert.equal(instance(instanceId).lastError?.code, 'VmmCrashed', 'why it had failed is kept')
    assert.equal(vmmsOf(instanceId).length, 1, 'no VMM was placed for a restart')
  })

  it('leaves a crashed instance under restart policy never failed, with the crash as its error', async () => {
    const instanceId = await driver.running(spec('never'))
    await vmmEnds(instanceId, CRASH)
    await until('the instance fails', () => instance(instanceId).state === 'failed')
    assert.deepEqual([instance(instanceId).lastError?.code, instance(instanceId).restartAt, instance(instanceId).intendedState], ['VmmCrashed', null, 'running'])
  })

  it('ends an instance whose guest powered itself off stopped, not failed, and never restarts it, whatever its policy', async () => {
    const instanceId = await driver.running(spec('on-failure'))
    await vmmEnds(instanceId, { cause: 'guest-poweroff', code: 0, signal: null })
    await until('the instance stops', () => instance(instanceId).state === 'stopped')
    assert.deepEqual([instance(instanceId).intendedState, instance(instanceId).lastError, instance(instanceId).restartAt], ['stopped', null, null])
    assert.ok(messagesOf(instanceId).includes('guest powered off'))
  })
})
