/**
 * Moving a VM keeps its promises (issue 25), fast: the real migrate workflow on the SDK's test
 * server, the agents played by the in-memory world. The guest runs in one place (a source whose
 * target has the VM is killed at once; a source its agent holds paused is resumed when the target
 * does not have the VM), a host that is away holds up neither a cancel nor a commit, and a reset
 * of a migration that committed never touches the VM where it now runs.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { ApplicationFailure } from '@temporalio/activity'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { WorkflowHandle } from '@temporalio/client'
import type { VmmRecord } from '../../domain/vmm.js'
import { cancelMigrationSignal } from '../../contract/messages.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'migration-one-place-test'

describe('moving a VM keeps its promises (workflow logic)', { timeout: 180_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld
  before(async () => { ({ driver, world } = await startInstanceDriver(TASK_QUEUE)) })
  after(async () => { await driver?.stop() })
  beforeEach(() => {
    world.unreachableHosts.clear()
    driver.targetsReadyWhenEnsured()
    world.agent.describeVmm = (vmm) => world.reportAgain(vmm)
  })

  const vmm = (id: string): VmmRecord => world.vmms.get(id)!

  /** The activity types and timers the execution scheduled, in order. */
  async function commands (handle: WorkflowHandle): Promise<string[]> {
    const { events } = await handle.fetchHistory()
    return (events ?? []).flatMap((e) => {
      if (e.activityTaskScheduledEventAttributes != null) return [`activity ${e.activityTaskScheduledEventAttributes.activityType?.name ?? ''}`]
      if (e.timerStartedEventAttributes != null) return [`timer ${Number(e.timerStartedEventAttributes.startToFireTimeout?.seconds ?? 0)} s`]
      return []
    })
  }

  it('a lost acknowledgement: the target has the VM, and the source its agent held is killed at once', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => driver.called('sendMigration', source))
    let activeAtKill: string | null | undefined
    const destroy = world.agent.destroyVmm
    world.agent.destroyVmm = (killed) => {
      if (killed.id === source) activeAtKill ??= world.instances.get(instanceId)!.activeVmmId
      return destroy(killed)
    }
    try {
      await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
      await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'held'))
      await handle.result()
    } finally {
      world.agent.destroyVmm = destroy
    }
    assert.equal(activeAtKill, target, 'the commit was recorded before the source was killed')
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
    assert.equal(vmm(source).state, 'destroyed')
    // The source's kill follows the commit with no timer between them (reports recorded on their
    // own may come before or after the kill, as they arrive).
    const all = await commands(handle)
    const kill = all.indexOf('activity destroyVmm')
    const commit = all.lastIndexOf('activity recordInstanceChange', kill)
    assert.deepEqual(all.slice(commit, kill).filter((command) => command.startsWith('timer')), [],
      `no wait between the commit and the kill: ${all.join(', ')}`)
  })

  it('a source held after a failed send is resumed when the target does not have the VM', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => driver.called('sendMigration', source))
    await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'held'))
    await driver.deliver(vmm(target), 'failed', { cause: 'boot-failed', code: null, signal: 'SIGKILL' }, world.half(vmm(target), 'target', 'failed'))
    await handle.result()
    assert.ok(driver.called('resumeHeldSource', source), 'the source was told to resume the VM')
    const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string } }
    assert.deepEqual([operation.status, operation.error.code], ['failed', 'MigrationFailed'])
    assert.equal(world.instances.get(instanceId)!.state, 'running')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, source)
    assert.equal(vmm(source).migration?.phase, 'failed')
  })

  it('the source\'s host away as the send is issued: a cancel kills the target at once, and ends once the source is heard', async () => {
    const instanceId = await driver.running()
    world.unreachableHosts.add('host-1')
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is tried', () => driver.called('sendMigration', source))
    await handle.signal(cancelMigrationSignal, { migrationId: request.operationId, requestedBy: 'a test' })
    await until('the target is cancelled', () => driver.called('cancelIncomingMigration', target))
    assert.equal(world.operations.get(request.operationId)!.status, 'running', 'the source is not heard yet')
    world.unreachableHosts.delete('host-1')
    await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'failed'))
    await handle.result()
    const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string } }
    assert.deepEqual([operation.status, operation.error.code], ['failed', 'MigrationCancelled'])
    assert.equal(world.instances.get(instanceId)!.activeVmmId, source)
    assert.equal(world.instances.get(instanceId)!.state, 'running')
  })

  it('the source\'s host away once it sent: the target\'s commit is recorded meanwhile, and the source killed once heard', async () => {
    const instanceId = await driver.running()
    world.agent.sendMigration = () => { world.unreachableHosts.add('host-1'); throw new Error('the answer was lost') }
    try {
      const { request, handle, source, target } = await driver.migrate(instanceId)
      await until('the send is tried', () => driver.called('sendMigration', source))
      await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
      await until('the commit is recorded', () => world.migrations.get(request.operationId)!.phases.includes('committed'))
      assert.equal(world.instances.get(instanceId)!.activeVmmId, target, 'the target is the active VMM while the source is away')
      world.unreachableHosts.delete('host-1')
      await handle.result()
      assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
      assert.equal(vmm(source).state, 'destroyed')
    } finally {
      world.agent.sendMigration = (v) => world.report(v, v.state, null, world.half(v, 'source', 'sending'))
    }
  })

  it('a reset of a migration that succeeded leaves the VM running where it is', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => driver.called('sendMigration', source))
    await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
    await driver.deliver(vmm(source), 'destroyed', { cause: 'migrated', code: 0, signal: null }, world.half(vmm(source), 'source', 'finished'))
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    const callsBefore = world.calls.length

    // `temporal workflow reset` to the first workflow task: the execution runs again from its start.
    const { events } = await handle.fetchHistory()
    const firstTask = events!.find((e) => e.workflowTaskCompletedEventAttributes != null)!
    const { runId } = await driver.client.workflowService.resetWorkflowExecution({
      namespace: 'default',
      workflowExecution: { workflowId: handle.workflowId, runId: handle.firstExecutionRunId },
      reason: 'a test resets a committed migration',
      workflowTaskFinishEventId: firstTask.eventId,
      requestId: randomUUID()
    })
    await driver.client.workflow.getHandle(handle.workflowId, runId!).result()
    const touched = world.calls.slice(callsBefore).filter((c) => c.vmmId === target && c.name !== 'describeVmm')
    assert.deepEqual(touched, [], 'nothing was done to the VMM the VM runs in')
    assert.equal(vmm(target).state, 'running')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
    assert.equal(world.instances.get(instanceId)!.state, 'running')
  })

  it('an agent that refuses to describe the target while the source has handed the VM over is no news: the migration waits and commits', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => driver.called('sendMigration', source))
    world.agent.describeVmm = () => { throw ApplicationFailure.nonRetryable('400 bad request', 'InvalidRequest') }
    await driver.deliver(vmm(source), 'destroyed', { cause: 'migrated', code: 0, signal: null }, world.half(vmm(source), 'source', 'finished'))
    await until('the target is asked about', () => driver.called('describeVmm', target), 10_000)
    await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
  })

  it('a failure that escapes a migration ends its execution, not in failure, and leaves the migration to be carried on', async () => {
    const instanceId = await driver.running()
    world.agent.resumeHeldSource = () => { throw ApplicationFailure.nonRetryable('409 not held', 'HostRefused') }
    try {
      const { request, handle, source, target } = await driver.migrate(instanceId)
      await until('the send is issued', () => driver.called('sendMigration', source))
      await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'held'))
      await driver.deliver(vmm(target), 'failed', { cause: 'boot-failed', code: null, signal: 'SIGKILL' }, world.half(vmm(target), 'target', 'failed'))
      await handle.result()
      assert.equal(world.operations.get(request.operationId)!.status, 'running', 'no outcome is recorded that both sides have not decided')
      assert.equal(world.instances.get(instanceId)!.state, 'migrating')
      const { type, status } = await handle.describe()
      assert.deepEqual([type, status.name], ['migrateInstance', 'COMPLETED'])
    } finally {
      world.agent.resumeHeldSource = (v) => world.report(v, 'running', null, world.half(v, 'source', 'failed'))
    }
  })
})
