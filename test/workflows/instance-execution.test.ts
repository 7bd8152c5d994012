/**
 * The instance workflows' logic, fast: the real workflow code (the built bundle) on a real
 * Temporal dev server through the SDK's TestWorkflowEnvironment, with the activities played by
 * an in-memory world (helpers/workflow-world.ts). Preemption, deadlines, hand-over, and the
 * write path's shape; what needs real processes is in test/integration and test/faults.
 */
import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import { decisionKeys } from '../../domain/decisions.js'
import type { HaltRequest, RebootRequest, StartRequest, StopRequest } from '../../domain/requests.js'
import { haltRequestedSignal, operationRequestedSignal } from '../../contract/messages.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { requestBase, TEST_SETTINGS, until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'instance-execution-test'

describe('instance executions (workflow logic)', { timeout: 120_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld

  before(async () => { ({ driver, world } = await startInstanceDriver(TASK_QUEUE)) })
  after(async () => { await driver?.stop() })
  beforeEach(() => {
    world.hostHasRoom = true
    world.afterDecision = async () => {}
    world.agent.ensureVmm = (vmm) => world.report(vmm, 'starting')
    world.agent.describeVmm = (vmm) => world.report(vmm, vmm.state)
    world.agent.rebootVmm = (vmm) => world.report(vmm, 'rebooting')
  })

  /** The agent's report that the instance's active VMM runs, sent as the agent sends it. */
  async function reportRunning (instanceId: string): Promise<void> {
    await driver.deliver(world.vmms.get(world.instances.get(instanceId)!.activeVmmId!)!, 'running')
  }

  async function runningInstance (): Promise<string> {
    const instanceId = await driver.running()
    assert.equal(world.instances.get(instanceId)!.state, 'running')
    return instanceId
  }

  it('creates and runs an instance, each write a regular activity named by its decision', async () => {
    const { request, handle } = await driver.startCreate()
    await until('the VMM is ensured', () => world.calls.some((c) => c.name === 'ensureVmm'))
    await reportRunning(request.instanceId)
    await handle.result()
    assert.equal(world.instances.get(request.instanceId)!.state, 'running')
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    const decided = world.events.filter((e) => e.instanceId === request.instanceId).map((e) => e.decision)
    assert.deepEqual(decided, [decisionKeys.started(request.operationId), decisionKeys.placed(request.operationId), decisionKeys.finished(request.operationId)])
    // The one local activity is the read that opens the execution (the other markers are patches').
    const { events } = await handle.fetchHistory()
    assert.equal(events?.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').length, 1)
  })

  it('a stop preempts a create whose VM never boots: the create is superseded, the VMM killed', async () => {
    const { request, handle } = await driver.create()
    const stop: StopRequest = { ...requestBase(request.instanceId), kind: 'stop', graceSeconds: 0 }
    await handle.signal(haltRequestedSignal, stop)
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'superseded')
    assert.equal(world.operations.get(stop.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(request.instanceId)!.state, 'stopped')
    assert.ok(world.calls.some((c) => c.name === 'destroyVmm' && c.vmmId === `vmm-of-${request.operationId}`))
  })

  it('at its boot deadline with no report, asks the agent before killing, and keeps a VM that runs', async () => {
    world.agent.describeVmm = (vmm) => world.report(vmm, 'running')
    const { request, handle } = await driver.startCreate()
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(request.instanceId)!.state, 'running')
    const vmmId = `vmm-of-${request.operationId}`
    assert.ok(world.calls.some((c) => c.name === 'describeVmm' && c.vmmId === vmmId))
    assert.ok(!world.calls.some((c) => c.name === 'destroyVmm' && c.vmmId === vmmId))
  })

  it('at a reboot\'s deadline with no report, asks the agent before replacing the VMM', async () => {
    const instanceId = await runningInstance()
    const vmmId = world.instances.get(instanceId)!.activeVmmId!
    // The agent's reports are lost; asked, it says the VM runs again.
    world.agent.describeVmm = (vmm) => world.report(vmm, 'running')
    const reboot: RebootRequest = { ...requestBase(instanceId), kind: 'reboot' }
    const handle = await driver.request(reboot)
    await handle.result()
    assert.equal(world.operations.get(reboot.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, vmmId, 'the VMM was replaced')
    assert.ok(!world.calls.some((c) => c.name === 'destroyVmm' && c.vmmId === vmmId))
  })

  it('a start handed to an execution that only takes in reports runs next, as its own execution', async () => {
    const instanceId = await runningInstance()
    const vmm = world.vmms.get(world.instances.get(instanceId)!.activeVmmId!)!
    // The guest powers off: a report starts an execution that settles the instance stopped.
    const reports = await driver.deliver(vmm, 'destroyed', { cause: 'guest-poweroff', code: 0, signal: null })
    const start: StartRequest = { ...requestBase(instanceId), kind: 'start' }
    await reports.signal(operationRequestedSignal, start)
    await until('the start succeeded', () => world.operations.get(start.operationId)?.status === 'succeeded' || driver.called('ensureVmm', `vmm-of-${start.operationId}`))
    await reportRunning(instanceId)
    await until('the start succeeded', () => world.operations.get(start.operationId)?.status === 'succeeded')
    assert.equal(world.instances.get(instanceId)!.state, 'running')
    const { type } = await driver.client.workflow.getHandle(reports.workflowId).describe()
    assert.equal(type, 'startInstance')
  })

  /** Runs `first` on a running instance; `second` reaches its execution while the write of `first`'s end is in flight. */
  async function haltMeetingAnother (first: 'stop' | 'delete', second: 'stop' | 'delete'): Promise<{ instanceId: string, first: HaltRequest, second: HaltRequest }> {
    const instanceId = await runningInstance()
    const haltOf = (kind: 'stop' | 'delete'): HaltRequest => ({ ...requestBase(instanceId), kind, graceSeconds: 0 })
    const [one, two] = [haltOf(first), haltOf(second)]
    const handle = await driver.halt(one)
    world.afterDecision = async (decision) => {
      if (decision === decisionKeys.halted(one.operationId)) await handle.signal(haltRequestedSignal, two)
    }
    return { instanceId, first: one, second: two }
  }

  it('a delete that arrives while a stop\'s end is being recorded runs as a halt of its own, not as done', async () => {
    const { instanceId, first: stop, second: remove } = await haltMeetingAnother('stop', 'delete')
    await until('the delete ended', () => world.operations.get(remove.operationId)?.status === 'succeeded')
    assert.equal(world.operations.get(stop.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.state, 'destroyed')
    assert.ok(world.decisions.has(decisionKeys.halted(remove.operationId)), 'the delete ran a halt of its own')
    assert.deepEqual(world.storageReleases, [{ instanceId, liveVmms: 0, state: 'stopped' }], "the disks go once, after the VMMs, before the instance's end")
  })

  it('a stop that arrives while a delete\'s end is being recorded ends saying the instance was destroyed, recording no state', async () => {
    const { instanceId, second: stop } = await haltMeetingAnother('delete', 'stop')
    await until('the stop ended', () => world.operations.get(stop.operationId)?.status === 'succeeded')
    assert.equal(world.instances.get(instanceId)!.state, 'destroyed')
    const stopEvents = world.events.filter((e) => e.decision.includes(stop.operationId)).map((e) => e.message)
    assert.deepEqual(stopEvents, ['stop done: the instance was already destroyed'])
  })

  it('waits for a host with room, showing NoCapacity, and fails honestly at the placement timeout', async () => {
    world.hostHasRoom = false
    const { request, handle } = await driver.startCreate()
    await until('the wait is recorded', () => world.instances.get(request.instanceId)!.lastError?.code === 'NoCapacity')
    assert.equal(world.instances.get(request.instanceId)!.state, 'starting')
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'failed')
    assert.equal(world.instances.get(request.instanceId)!.state, 'stopped')
    assert.ok(TEST_SETTINGS.placementTimeoutMs > 0)
  })

  it('places the VM as soon as a host has room', async () => {
    world.hostHasRoom = false
    const { request, handle } = await driver.startCreate()
    await until('the wait is recorded', () => world.instances.get(request.instanceId)!.lastError?.code === 'NoCapacity')
    world.hostHasRoom = true
    await until('the VMM is ensured', () => driver.called('ensureVmm', `vmm-of-${request.operationId}`))
    await reportRunning(request.instanceId)
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(request.instanceId)!.lastError, null)
  })
})
