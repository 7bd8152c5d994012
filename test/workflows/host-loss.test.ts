/**
 * A host declared lost ends what waits on it (I1, I6), fast: the real workflow code on the SDK's
 * test server, the activities played by the in-memory world, the lost host's agent answering
 * nothing. Whenever the declaration lands (while a VMM boots, while a stop presses, during a
 * reboot or a migration), the VMMs on that host are fenced, and a stop of the instance ends.
 * The fan-out itself (PostgreSQL and the signals) is in test/activities/host-fencing.test.ts.
 */
import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { WorkflowHandle } from '@temporalio/client'
import type { MigrateRequest, RebootRequest, StopRequest } from '../../domain/requests.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { requestBase, until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'host-loss-test'

describe('a host declared lost (workflow logic)', { timeout: 180_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld

  before(async () => {
    ({ driver, world } = await startInstanceDriver(TASK_QUEUE))
    world.temporal = { client: driver.client, taskQueue: TASK_QUEUE }
  })
  after(async () => { await driver?.stop() })
  beforeEach(() => {
    world.unreachableHosts.clear()
    world.lostHosts.clear()
    world.agent.ensureVmm = (vmm) => world.report(vmm, 'starting')
    world.agent.describeVmm = (vmm) => world.reportAgain(vmm)
    world.agent.pressPowerButton = (vmm) => world.report(vmm, 'stopping')
  })

  /** Whether an activity of this type completed in the execution (its answer is in the execution's memory). */
  async function completed (handle: WorkflowHandle, activityType: string): Promise<boolean> {
    const { events } = await handle.fetchHistory()
    const scheduled = new Set((events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === activityType).map((e) => String(e.eventId)))
    return (events ?? []).some((e) => scheduled.has(String(e.activityTaskCompletedEventAttributes?.scheduledEventId)))
  }

  /** Stops the instance with a short grace and waits for the stop to end, as a user would. */
  async function stopEnds (instanceId: string): Promise<void> {
    const stop: StopRequest = { ...requestBase(instanceId), kind: 'stop', graceSeconds: 1 }
    await driver.halt(stop)
    await until('the stop ended', () => world.operations.get(stop.operationId)?.status === 'succeeded', 20_000)
    assert.equal(world.instances.get(instanceId)!.state, 'stopped')
    assert.deepEqual(world.snapshot(instanceId)!.liveVmms, [], 'no VMM of the instance is left live')
  }

  it('while a VMM boots (its agent answered, its report not recorded yet): the boot ends and a stop ends', async () => {
    const { request, handle, vmmId } = await driver.create()
    // The agent answered the ensure (generation 1, held by the execution); then its host went dark.
    await until('the execution has the agent\'s answer', async () => await completed(handle, 'ensureVmm'))
    world.unreachableHosts.add('host-1')
    await world.declareHostLost('host-1', null)
    await until('the create ended', () => world.operations.get(request.operationId)?.status !== undefined && world.operations.get(request.operationId)?.status !== 'running', 20_000)
    assert.equal(world.operations.get(request.operationId)!.status, 'failed')
    assert.equal(world.vmms.get(vmmId)!.state, 'lost')
    assert.equal(world.instances.get(request.instanceId)!.lastError?.code, 'HostLost')
    await stopEnds(request.instanceId)
  })

  it('while a stop presses the power button of a VMM on it: the stop ends', async () => {
    const instanceId = await driver.running()
    world.agent.pressPowerButton = (vmm) => { world.unreachableHosts.add('host-1'); return world.report(vmm, 'stopping') }
    const stop: StopRequest = { ...requestBase(instanceId), kind: 'stop', graceSeconds: 30 }
    const handle = await driver.halt(stop)
    await until('the press was answered', async () => await completed(handle, 'pressPowerButton'))
    await world.declareHostLost('host-1', null)
    await until('the stop ended', () => world.operations.get(stop.operationId)?.status === 'succeeded', 20_000)
    assert.equal(world.instances.get(instanceId)!.state, 'stopped')
    assert.equal(world.instances.get(instanceId)!.lastError?.code, 'HostLost')
    assert.deepEqual(world.snapshot(instanceId)!.liveVmms, [])
  })

  it('during a reboot: a stop ends', async () => {
    const instanceId = await driver.running()
    world.agent.rebootVmm = (vmm) => { world.unreachableHosts.add('host-1'); return world.report(vmm, 'rebooting') }
    const reboot: RebootRequest = { ...requestBase(instanceId), kind: 'reboot' }
    const handle = await driver.request(reboot)
    await until('the reboot was answered', async () => await completed(handle, 'rebootVmm'))
    await world.declareHostLost('host-1', null)
    await stopEnds(instanceId)
  })

  it('during a migration, the source\'s host: a stop ends, the target killed too', async () => {
    const instanceId = await driver.running()
    const source = world.instances.get(instanceId)!.activeVmmId!
    world.agent.ensureVmm = (vmm) => world.report(vmm, 'starting', null, world.half(vmm, 'target', 'ready'))
    world.agent.sendMigration = (vmm) => { world.unreachableHosts.add('host-1'); return world.report(vmm, vmm.state, null, world.half(vmm, 'source', 'sending')) }
    const migrate: MigrateRequest = { ...requestBase(instanceId), kind: 'migrate' }
    const handle = await driver.request(migrate)
    await until('the send was answered', async () => await completed(handle, 'sendMigration'))
    await world.declareHostLost('host-1', null)
    await stopEnds(instanceId)
    assert.equal(world.vmms.get(source)!.state, 'lost')
    const target = world.migrations.get(migrate.operationId)!.targetVmmId!
    assert.equal(world.vmms.get(target)!.state, 'destroyed')
  })
})
