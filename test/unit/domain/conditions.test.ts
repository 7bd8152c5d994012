import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { conditionsOf, type ConditionInputs } from '../../../domain/conditions.js'

const at = '2026-11-22T10:00:00.000Z'
const now = Date.parse(at) + 120_000
const host = { id: 'host-1', status: 'active' as const, statusSince: at, contactFailingSince: null }
const base: ConditionInputs = {
  state: 'running',
  lastError: null,
  restartAt: null,
  vmm: { state: 'running', unresponsiveSince: null },
  host,
  now,
  unreachableAfterMs: 60_000
}

describe('conditionsOf', () => {
  it('has none for a healthy running instance', () => {
    assert.deepEqual(conditionsOf(base), [])
  })

  it('shows an unreachable host beside the unchanged state, with since', () => {
    const [condition] = conditionsOf({ ...base, host: { ...host, status: 'unreachable' } })
    assert.equal(condition.type, 'HostUnreachable')
    assert.equal(condition.since, at)
  })

  it('shows a host whose agent does not answer calls, once that has lasted the threshold', () => {
    const failingFor = (ms: number) => conditionsOf({ ...base, host: { ...host, contactFailingSince: new Date(now - ms).toISOString() } })
    assert.deepEqual(failingFor(59_000), [], 'not before the threshold')
    const [condition] = failingFor(61_000)
    assert.deepEqual([condition.type, condition.since], ['HostUnreachable', new Date(now - 61_000).toISOString()])
  })

  it('shows an unresponsive VMM API', () => {
    const [condition] = conditionsOf({ ...base, vmm: { state: 'running', unresponsiveSince: at } })
    assert.deepEqual([condition.type, condition.since], ['VmmUnresponsive', at])
  })

  it('says nothing of a host or VMM once the VMM is gone', () => {
    assert.deepEqual(conditionsOf({
      ...base,
      state: 'stopped',
      vmm: { state: 'destroyed', unresponsiveSince: at },
      host: { ...host, status: 'unreachable' }
    }), [])
  })

  it('shows a forced stop on a stopped instance', () => {
    const lastError = { code: 'StopForced', message: 'grace period of 2 s expired; VMM killed', at }
    assert.deepEqual(conditionsOf({ ...base, state: 'stopped', lastError, vmm: null, host: null }), [
      { type: 'StopForced', since: at, message: lastError.message }
    ])
    assert.deepEqual(conditionsOf({ ...base, state: 'running', lastError }), [], 'a later start clears it')
  })

  it('shows when a failed instance restarts by itself', () => {
    const restartAt = new Date(now + 10_000).toISOString()
    const [condition] = conditionsOf({ ...base, state: 'failed', restartAt, vmm: { state: 'failed', unresponsiveSince: null } })
    assert.deepEqual([condition.type, condition.since], ['RestartBackoff', restartAt])
  })
})
