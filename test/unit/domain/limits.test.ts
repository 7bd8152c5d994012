import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { classifyAgentError } from '../../../domain/errors.js'
import { INSTANCE_NAME_PATTERN, isSafeImageName } from '../../../domain/limits.js'

describe('isSafeImageName', () => {
  it('accepts names relative to the image directory', () => {
    for (const name of ['vmlinux', 'initrd.img', 'ubuntu/24.04/vmlinuz', 'a-b_c.1']) assert.ok(isSafeImageName(name), name)
  })

  it('refuses names that could leave the image directory or are malformed', () => {
    for (const name of ['', '/etc/passwd', '../vmlinux', 'a/../../b', 'a//b', './vmlinux', 'a/.', 'nul\0byte', 'x'.repeat(256)]) {
      assert.ok(!isSafeImageName(name), JSON.stringify(name))
    }
  })
})

describe('INSTANCE_NAME_PATTERN', () => {
  it('takes DNS labels only', () => {
    for (const name of ['web-1', 'a', '0db']) assert.match(name, INSTANCE_NAME_PATTERN)
    for (const name of ['Web', '-a', 'a-', 'a_b', 'a.b', '']) assert.doesNotMatch(name, INSTANCE_NAME_PATTERN)
  })
})

describe('classifyAgentError (docs/design.md §5)', () => {
  it('treats refusals as invalid requests, the agent’s own 404 as a VMM gone, a wrong token or agent as misconfigured, and everything else as unknown', () => {
    assert.equal(classifyAgentError(400, 'Bad Request'), 'InvalidRequest')
    assert.equal(classifyAgentError(409, 'Conflict'), 'InvalidRequest')
    assert.equal(classifyAgentError(404, 'VmmNotFound'), 'VmmNotFound')
    assert.equal(classifyAgentError(404, 'StrayNotFound'), 'VmmNotFound')
    for (const error of ['Not Found', null]) assert.equal(classifyAgentError(404, error), 'AgentMisconfigured', String(error))
    for (const status of [401, 403]) assert.equal(classifyAgentError(status, 'Unauthorized'), 'AgentMisconfigured', String(status))
    for (const status of [408, 429, 500, 502, 503, 504]) {
      assert.equal(classifyAgentError(status, null), 'HostUnreachable', String(status))
    }
  })
})
