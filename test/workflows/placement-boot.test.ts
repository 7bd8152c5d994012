/**
 * A boot that its placement asks of the agent (workflows/start.ts step 3, patch
 * `place-and-boot`): on the SDK's test server with the world's activities, whose placement asks
 * the scripted agent as the real one does (`WorkflowWorld.bootsOnPlacement`). An agent that
 * answers makes a create one activity shorter; one that does not is asked again by `ensureVmm`.
 * Every other workflow test runs with the agent never answering the placement, the path a slow
 * agent takes.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { decisionKeys } from '../../domain/decisions.js'
import type { StartRequest } from '../../domain/requests.js'
import { startInstanceDriver, type InstanceDriver } from '../helpers/instance-driver.js'
import { activitiesScheduled } from '../helpers/temporal-client.js'
import { requestBase, until, type WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'placement-boot-test'

describe('a boot its placement asks of the agent (workflow logic)', { timeout: 120_000 }, () => {
  let driver: InstanceDriver
  let world: WorkflowWorld
  before(async () => {
    ({ driver, world } = await startInstanceDriver(TASK_QUEUE))
    world.bootsOnPlacement = true
  })
  after(async () => { await driver?.stop() })

  const ensuresOf = (vmmId: string): number => world.calls.filter((c) => c.name === 'ensureVmm' && c.vmmId === vmmId).length

  it('a create whose agent answers the placement: no ensureVmm activity, running once its VMM reports so', async () => {
    const { request, handle, vmmId } = await driver.create()
    await driver.deliver(world.vmms.get(vmmId)!, 'running')
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.equal(world.instances.get(request.instanceId)!.state, 'running')
    assert.deepEqual(await activitiesScheduled(handle), ['placeVmm', 'recordInstanceChange'])
    assert.equal(ensuresOf(vmmId), 1, 'the agent was asked once')
    assert.equal(world.placementBoots.at(-1), true)
  })

  it('a create whose agent answers its placement with the VM running: the placement records its success; one activity, two workflow tasks, no timer, no signal', async () => {
    const answer = world.agent.ensureVmm
    world.agent.ensureVmm = (vmm) => world.report(vmm, 'running')
    try {
      const { request, handle, vmmId } = await driver.startCreate()
      await handle.result()
      assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
      assert.equal(world.instances.get(request.instanceId)!.state, 'running')
      assert.equal(world.vmms.get(vmmId)!.state, 'running', "the agent's answer is recorded with the success")
      assert.equal(world.decisions.get(decisionKeys.finished(request.operationId)), `running on ${world.vmms.get(vmmId)!.hostId}`)
      const events = (await handle.fetchHistory()).events ?? []
      assert.deepEqual(await activitiesScheduled(handle), ['placeVmm'])
      assert.equal(events.filter((e) => e.timerStartedEventAttributes != null).length, 0, 'no timer')
      assert.equal(events.filter((e) => e.workflowExecutionSignaledEventAttributes != null).length, 0, 'no signal')
      assert.equal(events.filter((e) => e.workflowTaskCompletedEventAttributes != null).length, 2)
    } finally {
      world.agent.ensureVmm = answer
    }
  })

  it('a create whose VMM reports running before its placement answers: running at once, not at the boot deadline', async () => {
    world.beforePlacementAnswers = async (vmmId) => { await driver.deliver(world.vmms.get(vmmId)!, 'running') }
    try {
      const { request, handle, vmmId } = await driver.startCreate()
      await handle.result()
      assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
      assert.equal(world.instances.get(request.instanceId)!.state, 'running')
      assert.ok(!driver.called('describeVmm', vmmId), 'the boot did not wait for its deadline to ask the agent')
    } finally {
      world.beforePlacementAnswers = null
    }
  })

  it('a create whose agent does not answer the placement: ensureVmm asks again, and the create ends running once it answers', async () => {
    world.unreachableHosts.add('host-1')
    const { request, handle, vmmId } = await driver.startCreate()
    try {
      await until('ensureVmm to be scheduled', async () => (await activitiesScheduled(handle)).includes('ensureVmm'))
    } finally {
      world.unreachableHosts.delete('host-1')
    }
    await until('the agent to answer ensureVmm', () => ensuresOf(vmmId) >= 2)
    await driver.deliver(world.vmms.get(vmmId)!, 'running')
    await handle.result()
    assert.equal(world.operations.get(request.operationId)!.status, 'succeeded')
    assert.deepEqual((await activitiesScheduled(handle)).slice(0, 2), ['placeVmm', 'ensureVmm'])
  })

  it('a start of a stopped instance asks at its placement too', async () => {
    const { request: created, handle: createHandle } = await driver.create(undefined, false)
    await createHandle.result()
    const start: StartRequest = { ...requestBase(created.instanceId), kind: 'start' }
    const startHandle = await driver.request(start)
    const vmmId = `vmm-of-${start.operationId}`
    await driver.callOf('ensureVmm', vmmId)
    await driver.deliver(world.vmms.get(vmmId)!, 'running')
    await startHandle.result()
    assert.equal(world.operations.get(start.operationId)!.status, 'succeeded')
    assert.ok(!(await activitiesScheduled(startHandle)).includes('ensureVmm'))
  })
})
