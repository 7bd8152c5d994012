/**
 * Each instance operation's own path, fast (workflows/create.ts, start.ts, reboot.ts, halt.ts):
 * the real workflow code on the SDK's test server, the agents' answers and reports played by the
 * in-memory world. A create that does not start, a start, a reboot in place and one that replaces
 * its VMM, a boot that never completes, a stop that escalates to the kill, one an operator forces
 * and one the guest honours, a delete. How operations meet each other (preemption, hand-over, the write path) is
 * instance-execution.test.ts's; what happens after a VMM ends by itself, auto-restart.test.ts's.
 * Real processes: test/integration/ (lifecycle, stop, boot-deadline).
 */
import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { RebootRequest, StartRequest } from '../../domain/requests.js'
import { forceStopSignal } from '../../contract/messages.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { requestBase, TEST_SETTINGS, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'instance-operations-test'

describe('instance operations (workflow logic)', { timeout: 180_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld
  before(async () => { ({ driver, world } = await startInstanceDriver(TASK_QUEUE)) })
  after(async () => { await driver?.stop() })
  beforeEach(() => {
    world.agent.describeVmm = (vmm) => world.reportAgain(vmm)
    world.agent.pressPowerButton = (vmm) => world.report(vmm, 'stopping')
    world.agent.rebootVmm = (vmm) => world.report(vmm, 'rebooting')
  })

  /** The messages of the instance's events, in the order they were recorded. */
  function messagesOf (instanceId: string): string[] {
    return world.events.filter((e) => e.instanceId === instanceId).map((e) => e.message)
  }

  async function stoppedInstance (): Promise<string> {
    const { request, handle } = await driver.create(undefined, false)
    await handle.result()
    return request.instanceId
  }

  it('creates an instance that does not start: recorded stopped, nothing placed', async () => {
    const { request, handle, vmmId } = await driver.create(undefined, false)
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(request.instanceId)!.state, 'stopped')
    assert.equal(world.instances.get(request.instanceId)!.activeVmmId, null)
    assert.ok(!world.vmms.has(vmmId))
    assert.deepEqual(messagesOf(request.instanceId), ['created'])
  })

  it('starts a stopped instance on a VMM the start names, running once it reports running', async () => {
    const instanceId = await stoppedInstance()
    const start: StartRequest = { ...requestBase(instanceId), kind: 'start' }
    const handle = await driver.request(start)
    const vmmId = `vmm-of-${start.operationId}`
    await driver.callOf('ensureVmm', vmmId)
    assert.equal(world.instances.get(instanceId)!.state, 'starting', 'not running before its VMM says so')
    await driver.deliver(world.vmms.get(vmmId)!, 'running')
    await handle.result()
    assert.equal(world.operations.get(start.operationId)!.status, 'succeeded')
    assert.deepEqual([world.instances.get(instanceId)!.state, world.instances.get(instanceId)!.activeVmmId], ['running', vmmId])
  })

  it('reboots in place: the same VMM, running again once it reports so', async () => {
    const instanceId = await driver.running()
    const vmmId = world.instances.get(instanceId)!.activeVmmId!
    const reboot: RebootRequest = { ...requestBase(instanceId), kind: 'reboot' }
    const handle = await driver.request(reboot)
    await driver.callOf('rebootVmm', vmmId)
    assert.equal(world.instances.get(instanceId)!.state, 'rebooting')
    await driver.deliver(world.vmms.get(vmmId)!, 'running')
    await handle.result()
    assert.equal(world.operations.get(reboot.operationId)!.status, 'succeeded')
    assert.deepEqual([world.instances.get(instanceId)!.state, world.instances.get(instanceId)!.activeVmmId], ['running', vmmId])
    assert.ok(!driver.called('destroyVmm', vmmId))
    assert.ok(messagesOf(instanceId).includes('rebooted'))
  })

  it('replaces the VMM of a VM that does not come back from a reboot: the old one killed, a new one placed and run', async () => {
    const instanceId = await driver.running()
    const old = world.instances.get(instanceId)!.activeVmmId!
    const reboot: RebootRequest = { ...requestBase(instanceId), kind: 'reboot' }
    const handle = await driver.request(reboot)
    const replacement = `vmm-of-${reboot.operationId}`
    // No report by the boot timeout, and its agent, asked, says it is still rebooting.
    await driver.callOf('ensureVmm', replacement)
    assert.ok(driver.called('describeVmm', old), 'its agent was asked before the kill')
    assert.ok(driver.called('destroyVmm', old))
    await driver.deliver(world.vmms.get(replacement)!, 'running')
    await handle.result()
    assert.equal(world.operations.get(reboot.operationId)!.status, 'succeeded')
    assert.deepEqual([world.instances.get(instanceId)!.state, world.instances.get(instanceId)!.activeVmmId], ['running', replacement])
    assert.ok(messagesOf(instanceId).includes('VM did not come back from reboot; replacing its VMM'))
  })

  it('kills a VM that never boots at the boot deadline, once its agent says it does not run: the start fails BootTimeout, the instance stopped', async () => {
    const { request, handle, vmmId } = await driver.create()
    await handle.result()
    const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string } }
    assert.deepEqual([operation.status, operation.error.code], ['failed', 'BootTimeout'])
    assert.equal(world.instances.get(request.instanceId)!.state, 'stopped')
    assert.equal(world.instances.get(request.instanceId)!.lastError?.code, 'BootTimeout')
    assert.ok(driver.called('describeVmm', vmmId), 'its agent was asked first')
    assert.ok(driver.called('destroyVmm', vmmId))
    assert.equal(world.vmms.get(vmmId)!.state, 'destroyed')
    assert.ok(TEST_SETTINGS.bootTimeoutMs > 0)
  })

  it('a stop presses the power button, and kills a guest that ignores it at the end of its grace period: stopped, StopForced', async () => {
    const instanceId = await driver.running()
    const vmmId = world.instances.get(instanceId)!.activeVmmId!
    const stop = { ...requestBase(instanceId), kind: 'stop' as const, graceSeconds: 1 }
    const handle = await driver.halt(stop)
    await handle.result()
    assert.equal(world.operations.get(stop.operationId)!.status, 'succeeded')
    const calls = world.calls.filter((c) => c.vmmId === vmmId).map((c) => c.name)
    assert.deepEqual(calls.slice(calls.indexOf('pressPowerButton')), ['pressPowerButton', 'destroyVmm'], 'the button first, then the kill')
    assert.equal(world.instances.get(instanceId)!.state, 'stopped')
    assert.equal(world.instances.get(instanceId)!.lastError?.code, 'StopForced')
    assert.ok(messagesOf(instanceId).includes('stopped: grace period of 1 s expired; VMM killed'))
  })

  it('a force-stop cuts a stop\'s grace period short: the VMM killed at once, the instance stopped saying who forced it', async () => {
    const instanceId = await driver.running()
    const vmmId = world.instances.get(instanceId)!.activeVmmId!
    const stop = { ...requestBase(instanceId), kind: 'stop' as const, graceSeconds: 3600 }
    const handle = await driver.halt(stop)
    await driver.callOf('pressPowerButton', vmmId)
    await handle.signal(forceStopSignal, { reason: 'a test' })
    await handle.result()
    assert.equal(world.operations.get(stop.operationId)!.status, 'succeeded')
    assert.ok(driver.called('destroyVmm', vmmId))
    assert.equal(world.instances.get(instanceId)!.lastError?.code, 'StopForced')
    assert.ok(messagesOf(instanceId).includes('stopped: forced by a test; VMM killed'), messagesOf(instanceId).join('\n'))
  })

  it('a stop whose guest powers off at the button ends gracefully: stopped, no error, nothing killed', async () => {
    world.agent.pressPowerButton = (vmm) => world.report(vmm, 'destroyed', { cause: 'guest-poweroff', code: 0, signal: null })
    const instanceId = await driver.running()
    const vmmId = world.instances.get(instanceId)!.activeVmmId!
    const stop = { ...requestBase(instanceId), kind: 'stop' as const, graceSeconds: 30 }
    await (await driver.halt(stop)).result()
    assert.equal(world.operations.get(stop.operationId)!.status, 'succeeded')
    assert.ok(!driver.called('destroyVmm', vmmId))
    assert.deepEqual([world.instances.get(instanceId)!.state, world.instances.get(instanceId)!.intendedState, world.instances.get(instanceId)!.lastError], ['stopped', 'stopped', null])
    assert.ok(messagesOf(instanceId).includes('stopped: guest powered off'))
  })

  it('deletes a stopped instance: destroyed, its storage released once', async () => {
    const instanceId = await stoppedInstance()
    const remove = { ...requestBase(instanceId), kind: 'delete' as const, graceSeconds: 0 }
    await (await driver.halt(remove)).result()
    assert.equal(world.operations.get(remove.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.state, 'destroyed')
    assert.notEqual(world.instances.get(instanceId)!.destroyedAt, null)
    assert.deepEqual(world.storageReleases.filter((r) => r.instanceId === instanceId), [{ instanceId, liveVmms: 0, state: 'stopped' }])
  })
})
