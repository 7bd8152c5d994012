/**
 * vmplane on a Temporal server with its default dynamic config, as a cluster whose settings
 * nobody can change runs (Temporal Cloud): no eager activity dispatch, and the default minimal
 * interval between runs of one workflow ID. Operations that follow each other at once, the case
 * that interval holds back, still each end recorded as what happened.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

interface Accepted {
  instance: InstanceBody
  operation: { id: string, kind: string, status: string }
}

describe('on a Temporal server with default dynamic config', { timeout: 5 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 1, env: { VMPLANE_TEMPORAL_DYNAMIC_CONFIG: 'default' } }) })
  after(async () => { await stack?.stop() })

  it('creates, stops, starts and deletes, each request sent the moment the previous one answers', async () => {
    const created = await api(stack).post<Accepted>('/v1/instances?wait=60', newInstance('defaults'))
    assert.equal(created.status, 200, JSON.stringify(created.body))
    assert.equal(created.body.operation.status, 'succeeded')
    const { id } = created.body.instance
    for (const [path, state] of [['stop', 'stopped'], ['start', 'running'], ['stop', 'stopped']] as const) {
      const answer = await api(stack).post<Accepted>(`/v1/instances/${id}/${path}?wait=60`, path === 'stop' ? { graceSeconds: 0 } : undefined)
      assert.equal(answer.status, 200, JSON.stringify(answer.body))
      assert.equal(answer.body.operation.status, 'succeeded', `${path}: ${JSON.stringify(answer.body.operation)}`)
      assert.equal(answer.body.instance.state, state)
    }
    const deleted = await api(stack).request<Accepted>('DELETE', `/v1/instances/${id}?graceSeconds=0&wait=60`)
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body))
    assert.equal(deleted.body.operation.status, 'succeeded')
    assert.equal(deleted.body.instance.state, 'destroyed')
  })

  it('a stop sent while the create still runs ends the instance stopped, the create superseded or done', async () => {
    const created = await api(stack).post<Accepted>('/v1/instances', newInstance('defaults-race', 'sim.boot_ms=500'))
    assert.equal(created.status, 202)
    const stopped = await api(stack).post<Accepted>(`/v1/instances/${created.body.instance.id}/stop?wait=60`, { graceSeconds: 0 })
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body))
    assert.equal(stopped.body.operation.status, 'succeeded')
    const instance = await waitForState(stack, created.body.instance.id, 'stopped')
    assert.equal(instance.intendedState, 'stopped')
    const { body: create } = await api(stack).get<{ status: string }>(`/v1/operations/${created.body.operation.id}`)
    assert.ok(create.status === 'superseded' || create.status === 'succeeded', create.status)
  })
})
