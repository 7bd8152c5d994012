/**
 * Live migration's logic, fast (workflows/migrate.ts): the real workflow code on the SDK's test
 * server, with the agents' answers and reports scripted by the in-memory world. The commit
 * point, cancel before and after it, the timeouts, a stop during a migration, and a source that
 * hands the VM over before its target says so. Real processes: test/integration/migration.test.ts.
 */
import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import { ApplicationFailure } from '@temporalio/activity'
import type { StopRequest } from '../../domain/requests.js'
import type { VmmRecord } from '../../domain/vmm.js'
import { cancelMigrationSignal, haltRequestedSignal } from '../../contract/messages.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { requestBase, until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'migration-test'

describe('live migration (workflow logic)', { timeout: 180_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld
  before(async () => { ({ driver, world } = await startInstanceDriver(TASK_QUEUE)) })
  after(async () => { await driver?.stop() })
  beforeEach(() => {
    driver.targetsReadyWhenEnsured()
    world.agent.describeVmm = (vmm) => world.reportAgain(vmm)
  })

  const sent = (source: string): boolean => driver.called('sendMigration', source)
  const vmm = (id: string): VmmRecord => world.vmms.get(id)!

  /** What the two agents report when the VM arrives: the target has it, the source exits 0. */
  async function arrive (source: string, target: string): Promise<void> {
    await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
    await driver.deliver(vmm(source), 'destroyed', { cause: 'migrated', code: 0, signal: null }, world.half(vmm(source), 'source', 'finished', 3))
  }

  it('migrates: target reserved on another host, the commit makes it active, the source exits', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => sent(source))
    assert.equal(world.instances.get(instanceId)!.state, 'migrating')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, source, 'the active VMM changes only at the commit point')
    assert.equal(vmm(target).hostId, 'host-2')
    await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'sending', 2))
    await arrive(source, target)
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.deepEqual(world.migrations.get(request.operationId)!.phases, ['reserving', 'preparing', 'sending', 'committed', 'succeeded'])
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
    assert.equal(world.instances.get(instanceId)!.state, 'running')
    assert.ok(!world.calls.some((c) => (c.name === 'destroyVmm' || c.name === 'cancelIncomingMigration') && (c.vmmId === source || c.vmmId === target)), 'nothing was killed')
  })

  it('a cancel before the commit point kills the target and leaves the VM running on the source', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => sent(source))
    await handle.signal(cancelMigrationSignal, { migrationId: request.operationId, requestedBy: 'a test' })
    await until('the target is cancelled', () => driver.called('cancelIncomingMigration', target))
    // With its target gone, the source's send fails and the VM resumes there.
    await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'failed'))
    await handle.result()
    const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string } }
    assert.equal(operation.status, 'failed')
    assert.equal(operation.error.code, 'MigrationCancelled')
    assert.deepEqual(world.migrations.get(request.operationId)!.phases.at(-1), 'cancelled')
    assert.ok(world.migrations.get(request.operationId)!.cancelRequested)
    assert.equal(world.instances.get(instanceId)!.activeVmmId, source)
    assert.equal(world.instances.get(instanceId)!.state, 'running')
    assert.equal(vmm(target).state, 'destroyed')
  })

  it('a cancel that comes too late finds the target finished: the migration commits, nothing is lost', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => sent(source))
    // The VM arrived, but neither agent's report has reached the workflow yet.
    world.agent.cancelIncomingMigration = (v) => world.report(v, 'running', null, world.half(v, 'target', 'finished'))
    await handle.signal(cancelMigrationSignal, { migrationId: request.operationId, requestedBy: 'a test' })
    await until('the target is asked to cancel', () => driver.called('cancelIncomingMigration', target))
    await driver.deliver(vmm(source), 'destroyed', { cause: 'migrated', code: 0, signal: null }, world.half(vmm(source), 'source', 'finished'))
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
    assert.equal(vmm(target).state, 'running')
    world.agent.cancelIncomingMigration = (v) => world.report(v, 'destroyed', { cause: 'killed', code: null, signal: 'SIGKILL' }, world.half(v, 'target', 'failed'))
  })

  it('a source that hands the VM over before its target says so waits for the target, never cancels it', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => sent(source))
    await driver.deliver(vmm(source), 'destroyed', { cause: 'migrated', code: 0, signal: null }, world.half(vmm(source), 'source', 'finished'))
    await new Promise((resolve) => setTimeout(resolve, 300))
    await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
    assert.ok(!world.calls.some((c) => c.name === 'cancelIncomingMigration' && c.vmmId === target))
  })

  it('with no progress for the progress timeout, cancels, and the VM stays on the source', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the target is cancelled', () => driver.called('cancelIncomingMigration', target))
    await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'failed'))
    await handle.result()
    const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string, message: string } }
    assert.equal(operation.error.code, 'MigrationTimedOut')
    assert.match(operation.error.message, /no progress for 2 s/)
    assert.equal(world.instances.get(instanceId)!.state, 'running')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, source)
  })

  it('when both sides resume after a lost acknowledgement, the target wins and the source is killed', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => sent(source))
    await driver.deliver(vmm(target), 'running', null, world.half(vmm(target), 'target', 'finished'))
    await driver.deliver(vmm(source), 'running', null, world.half(vmm(source), 'source', 'failed'))
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.activeVmmId, target)
    assert.ok(world.calls.some((c) => c.name === 'destroyVmm' && c.vmmId === source), 'the source was killed')
    assert.equal(vmm(source).state, 'destroyed')
  })

  it('a stop during a migration stops both VMMs and reads stopped only once both are gone', async () => {
    const instanceId = await driver.running()
    const { request, handle, source, target } = await driver.migrate(instanceId)
    await until('the send is issued', () => sent(source))
    const stop: StopRequest = { ...requestBase(instanceId), kind: 'stop', graceSeconds: 0 }
    await handle.signal(haltRequestedSignal, stop)
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'superseded')
    assert.equal(world.migrations.get(request.operationId)!.phases.at(-1), 'aborted')
    assert.equal(world.operations.get(stop.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(instanceId)!.state, 'stopped')
    for (const id of [source, target]) {
      assert.ok(world.calls.some((c) => c.name === 'destroyVmm' && c.vmmId === id), `VMM ${id} killed`)
      assert.equal(vmm(id).state, 'destroyed')
    }
  })

  it('a send the source\'s agent refuses fails the migration before its commit point, and the target goes', async () => {
    const instanceId = await driver.running()
    world.agent.sendMigration = () => { throw ApplicationFailure.nonRetryable('cannot send VMM: it is stopping', 'HostRefused') }
    try {
      const { request, handle, source, target } = await driver.migrate(instanceId)
      await handle.result()
      const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string, message: string } }
      assert.equal(operation.error.code, 'MigrationFailed')
      assert.match(operation.error.message, /refused to send: cannot send VMM: it is stopping/)
      assert.ok(world.calls.some((c) => c.name === 'cancelIncomingMigration' && c.vmmId === target), 'the target is cancelled')
      assert.equal(world.instances.get(instanceId)!.activeVmmId, source)
      assert.equal(world.instances.get(instanceId)!.state, 'running')
    } finally {
      world.agent.sendMigration = (vmm) => world.report(vmm, vmm.state, null, world.half(vmm, 'source', 'sending'))
    }
  })

  it('refuses to migrate an instance that is not running, or to the host it runs on', async () => {
    const instanceId = await driver.running()
    const { request, handle } = await driver.migrate(instanceId, 'host-1')
    await handle.result()
    const operation = world.operations.get(request.operationId)! as { status: string, error: { code: string, message: string } }
    assert.equal(operation.error.code, 'Conflict')
    assert.match(operation.error.message, /already runs on host host-1/)
    assert.equal(world.instances.get(instanceId)!.state, 'running')
  })
})
