/**
 * What a host drain reads of its host (activities/drains.ts, `instancesOnHost`) against a real
 * PostgreSQL: every instance with a live VMM there, whether that VMM is the instance's active
 * one (to be moved) or another half of a migration (waited for). A drain ends `drained` only when
 * this is empty, so a migration's target placed on the host before the cordon keeps it open.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { createDrains } from '../../activities/drains.js'
import { insertInstance } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import type { VmmState } from '../../domain/vmm.js'
import { insertHost, startDatabase, type TestDatabase } from '../helpers/database.js'

describe('the instances a drain finds on its host', () => {
  let db: TestDatabase
  before(async () => {
    db = await startDatabase()
    for (const host of ['host-1', 'host-2']) await insertHost(db.pool, host)
  })
  after(async () => { await db?.stop() })

  /** A running instance whose active VMM is on `hostId`. */
  async function instanceOn (hostId: string): Promise<{ instanceId: string, activeVmmId: string }> {
    const instanceId = randomUUID()
    await inTransaction(db.pool, async (tx) => await insertInstance(tx, instanceId, { name: `d-${instanceId.slice(0, 8)}`, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 30, restartPolicy: 'never', intendedState: 'running' }))
    const activeVmmId = await vmmOf(instanceId, hostId, 'running')
    await db.pool.query("UPDATE instances SET state = 'running', active_vmm_id = $2 WHERE id = $1", [instanceId, activeVmmId])
    return { instanceId, activeVmmId }
  }

  async function vmmOf (instanceId: string, hostId: string, state: VmmState): Promise<string> {
    const vmmId = randomUUID()
    await db.pool.query('INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, $3, $4)', [vmmId, instanceId, hostId, state])
    return vmmId
  }

  async function setVmmState (vmmId: string, state: VmmState): Promise<void> {
    await db.pool.query('UPDATE vmms SET state = $2 WHERE id = $1', [vmmId, state])
  }

  async function onHost1 (instanceId: string) {
    return (await createDrains(db.pool).instancesOnHost('host-1')).filter((i) => i.id === instanceId)
  }

  it('lists an instance whose active VMM is on the host, to be moved', async () => {
    const { instanceId } = await instanceOn('host-1')
    assert.deepEqual((await onHost1(instanceId)).map((i) => [i.state, i.activeElsewhere]), [['running', false]])
  })

  for (const state of ['starting', 'running'] as const) {
    it(`lists an instance whose migration's target is on the host (${state}) while its active VMM is elsewhere, until the target ends`, async () => {
      const { instanceId } = await instanceOn('host-2')
      await db.pool.query("UPDATE instances SET state = 'migrating' WHERE id = $1", [instanceId])
      const target = await vmmOf(instanceId, 'host-1', state)
      assert.deepEqual((await onHost1(instanceId)).map((i) => [i.state, i.activeElsewhere]), [['migrating', true]])
      await setVmmState(target, 'destroyed')
      assert.deepEqual(await onHost1(instanceId), [])
    })
  }

  it('lists an instance whose migration committed while its source on the host still runs, until the source ends', async () => {
    const { instanceId, activeVmmId: source } = await instanceOn('host-1')
    const target = await vmmOf(instanceId, 'host-2', 'running')
    await db.pool.query("UPDATE instances SET state = 'migrating', active_vmm_id = $2 WHERE id = $1", [instanceId, target])
    assert.deepEqual((await onHost1(instanceId)).map((i) => i.activeElsewhere), [true])
    await setVmmState(source, 'destroyed')
    assert.deepEqual(await onHost1(instanceId), [])
  })

  it('leaves out VMMs that ended: destroyed, failed, lost', async () => {
    const { instanceId, activeVmmId } = await instanceOn('host-2')
    for (const state of ['destroyed', 'failed', 'lost'] as const) await vmmOf(instanceId, 'host-1', state)
    await db.pool.query("UPDATE instances SET state = 'stopped', active_vmm_id = NULL WHERE id = $1", [instanceId])
    await setVmmState(activeVmmId, 'destroyed')
    assert.deepEqual(await onHost1(instanceId), [])
  })
})
