/**
 * A host's drain (workflows/drain-host.ts) in the fast layer: the real workflow on a dev server
 * of its own, its activities played by a `DrainWorld`. It moves the host's running instances a
 * few at a time, tries a failed migration again up to three times before it gives up on the
 * instance, stops when told to, ends `drained` only once nothing lives on the host (a
 * migration's target placed there before the cordon, a source that outlives its commit), moves
 * only instances whose active VMM is there, and counts what it moved.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { InstanceState } from '../../domain/instance.js'
import { stopDrainSignal } from '../../contract/messages.js'
import { DrainWorld, newHostId, startDrain } from '../helpers/drain-world.js'
import { startWorkerEnvironment, type WorkerEnvironment } from '../helpers/workflow-environment.js'
import { until } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'drain-host-test'
/** Rounds are 2 s apart: a few rounds, and then some. */
const ROUNDS_TIMEOUT_MS = 15_000

describe('host drains (workflow logic)', { timeout: 120_000 }, () => {
  const world = new DrainWorld()
  let env: WorkerEnvironment
  before(async () => { env = await startWorkerEnvironment(TASK_QUEUE, world.activities()) })
  after(async () => { await env?.stop() })

  /** Waits until the drain has looked at its host `rounds` more times. */
  async function roundsPass (hostId: string, rounds: number): Promise<void> {
    const target = (world.looks.get(hostId) ?? 0) + rounds
    await until(`${rounds} more rounds of the drain of ${hostId}`, () => (world.looks.get(hostId) ?? 0) >= target, ROUNDS_TIMEOUT_MS)
  }

  for (const state of ['migrating', 'running'] as const satisfies InstanceState[]) {
    it(`waits for a migration's target placed on the host before the cordon, never moves its instance (${state}), and ends drained once the target ended`, async () => {
      const drained = newHostId()
      const instanceId = world.addInstance(newHostId())
      world.instances.get(instanceId)!.state = state
      const target = world.addVmm(instanceId, drained, 'starting')
      const { input, handle } = await startDrain(env.client, TASK_QUEUE, drained)
      // A drain that ended after a round never looks again.
      await roundsPass(drained, 3)
      assert.deepEqual(world.migrationsAsked.filter((r) => r.instanceId === instanceId), [], 'the drain asked to migrate an instance whose active VMM is elsewhere')
      assert.equal(world.lastProgress(input.drainId)?.status, 'draining')

      world.vmms.get(target)!.state = 'destroyed'
      assert.equal(await handle.result(), 'drained')
      assert.deepEqual(world.lastProgress(input.drainId), { drainId: input.drainId, status: 'drained', total: 0, migrated: 0, failed: 0, lastError: null })
    })
  }

  it('waits for a source that outlives its migration\'s commit, and for the operation\'s outcome, and counts it migrated', async () => {
    const drained = newHostId()
    const instanceId = world.addInstance(drained)
    const source = world.instances.get(instanceId)!.activeVmmId!
    const { input, handle } = await startDrain(env.client, TASK_QUEUE, drained)
    await until('the drain asks to migrate the instance', () => world.migrationsAsked.some((r) => r.instanceId === instanceId), ROUNDS_TIMEOUT_MS)
    const [request] = world.migrationsAsked.filter((r) => r.instanceId === instanceId)

    // The commit point: the target is the active VMM; the source has not exited yet.
    const instance = world.instances.get(instanceId)!
    instance.state = 'migrating'
    instance.activeVmmId = world.addVmm(instanceId, newHostId(), 'running')
    await roundsPass(drained, 2)
    // The source is gone, and the operation records its success a moment later.
    world.vmms.get(source)!.state = 'destroyed'
    await roundsPass(drained, 2)
    assert.equal(world.migrationsAsked.filter((r) => r.instanceId === instanceId).length, 1, 'the instance was asked to migrate again')

    world.outcomes.set(request!.operationId, { status: 'succeeded', error: null })
    assert.equal(await handle.result(), 'drained')
    assert.deepEqual(world.lastProgress(input.drainId), { drainId: input.drainId, status: 'drained', total: 1, migrated: 1, failed: 0, lastError: null })
  })

  /** The migrations the drain asked for of the instances given, in order. */
  const askedOf = (instanceIds: string[]) => world.migrationsAsked.filter((r) => instanceIds.includes(r.instanceId))

  it('moves the host\'s running instances two at a time, as asked, and ends drained with every one counted', async () => {
    const drained = newHostId()
    const instanceIds = [world.addInstance(drained), world.addInstance(drained), world.addInstance(drained)]
    const { input, handle } = await startDrain(env.client, TASK_QUEUE, drained)
    await until('two migrations are asked for', () => askedOf(instanceIds).length === 2, ROUNDS_TIMEOUT_MS)
    await roundsPass(drained, 2)
    assert.equal(askedOf(instanceIds).length, 2, 'no third while two are in flight')
    world.endMigration(askedOf(instanceIds)[0]!, { status: 'succeeded' })
    await until('the third is asked for', () => askedOf(instanceIds).length === 3, ROUNDS_TIMEOUT_MS)
    assert.equal(new Set(askedOf(instanceIds).map((r) => r.instanceId)).size, 3, 'each instance asked once')
    for (const request of askedOf(instanceIds).slice(1)) world.endMigration(request, { status: 'succeeded' })
    assert.equal(await handle.result(), 'drained')
    assert.deepEqual(world.lastProgress(input.drainId), { drainId: input.drainId, status: 'drained', total: 3, migrated: 3, failed: 0, lastError: null })
  })

  it('tries an instance whose migration fails again, three times in all, then ends failed naming the last error', async () => {
    const drained = newHostId()
    const instanceId = world.addInstance(drained)
    const { input, handle } = await startDrain(env.client, TASK_QUEUE, drained)
    for (let attempt = 1; attempt <= 3; attempt++) {
      await until(`migration ${attempt} is asked for`, () => askedOf([instanceId]).length === attempt, ROUNDS_TIMEOUT_MS)
      world.endMigration(askedOf([instanceId])[attempt - 1]!, { status: 'failed', error: `MigrationFailed: attempt ${attempt}` })
    }
    assert.equal(await handle.result(), 'failed')
    assert.equal(askedOf([instanceId]).length, 3)
    assert.deepEqual(world.lastProgress(input.drainId), { drainId: input.drainId, status: 'failed', total: 1, migrated: 0, failed: 1, lastError: `instance ${instanceId}: MigrationFailed: attempt 3` })
  })

  it('stops when told to (the host uncordoned), leaving the migrations it asked for to their operations', async () => {
    const drained = newHostId()
    const instanceId = world.addInstance(drained)
    const { input, handle } = await startDrain(env.client, TASK_QUEUE, drained)
    await until('the migration is asked for', () => askedOf([instanceId]).length === 1, ROUNDS_TIMEOUT_MS)
    await handle.signal(stopDrainSignal)
    assert.equal(await handle.result(), 'stopped')
    assert.deepEqual(world.lastProgress(input.drainId), { drainId: input.drainId, status: 'stopped', total: 1, migrated: 0, failed: 0, lastError: null })
  })
})
