import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { conditionsOf, type ConditionInputs } from '../../../domain/conditions.js'

const at = '2026-11-22T10:00:00.000Z'
const base: ConditionInputs = {
  state: 'running',
  lastError: null,
  vmm: { state: 'running', unresponsiveSince: null },
  host: { id: 'host-1', status: 'active', statusSince: at }
}

describe('conditionsOf', () => {
  it('has none for a healthy running instance', () => {
    assert.deepEqual(conditionsOf(base), [])
  })

  it('shows an unreachable host beside the unchanged state, with since', () => {
    const [condition] = conditionsOf({ ...base, host: { id: 'host-1', status: 'unreachable', statusSince: at } })
    assert.equal(condition.type, 'HostUnreachable')
    assert.equal(condition.since, at)
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
      host: { id: 'host-1', status: 'unreachable', statusSince: at }
    }), [])
  })

  it('shows a forced stop on a stopped instance', () => {
    const lastError = { code: 'StopForced', message: 'grace period of 2 s expired; VMM killed', at }
    assert.deepEqual(conditionsOf({ ...base, state: 'stopped', lastError, vmm: null, host: null }), [
      { type: 'StopForced', since: at, message: lastError.message }
    ])
    assert.deepEqual(conditionsOf({ ...base, state: 'running', lastError }), [], 'a later start clears it')
  })
})
