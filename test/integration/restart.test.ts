/**
 * A second start of the whole stack on the same data directory finds everything as it was:
 * instances in PostgreSQL, workflows in Temporal's SQLite file, and running VMMs re-adopted by
 * their restarted host agents (never restarted, never duplicated).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { newInstance, vmmProcesses, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

describe('restarting the whole stack', () => {
  let stack: TestStack
  before(async () => { stack = await startStack() })
  after(async () => { await stack?.stop() })

  it('finds running and stopped instances unchanged, with the same VMM process', async () => {
    const running = (await api(stack).post<{ instance: InstanceBody }>('/v1/instances', newInstance('keeps-running'))).body.instance.id
    const stopped = (await api(stack).post<{ instance: InstanceBody }>('/v1/instances', { ...newInstance('stays-stopped'), start: false })).body.instance.id
    const before = await waitForState(stack, running, 'running')
    await waitForState(stack, stopped, 'stopped')
    const vmm = before.vmm
    assert.ok(vmm !== null)
    const pids = await vmmProcesses(stack, vmm)
    assert.equal(pids.length, 1)

    stack = await stack.restart()

    const after = await waitForState(stack, running, 'running')
    assert.deepEqual({ ...after, updatedAt: null }, { ...before, updatedAt: null }, 'the running instance is as it was')
    assert.equal((await waitForState(stack, stopped, 'stopped')).vmm, null)
    assert.deepEqual(await vmmProcesses(stack, vmm), pids, 'the same VMM process, re-adopted')

    assert.equal((await api(stack).post(`/v1/instances/${running}/stop`, { graceSeconds: 10 })).status, 202)
    await waitForState(stack, running, 'stopped')
    assert.deepEqual(await vmmProcesses(stack, vmm), [])
  })
})
