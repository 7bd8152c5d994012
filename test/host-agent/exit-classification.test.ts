/**
 * How the end of a VMM is reported, for every way it can end.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { classifyExit, type ExitContext } from '../../host-agent/supervisor/exit-classification.js'

const none: ExitContext = { destroyRequested: false, pendingKill: null, migration: null }
const known = (code: number | null, signal: string | null = null) => ({ known: true as const, code, signal })
const unknown = { known: false as const }

describe('classifyExit', () => {
  it('a destroy request is `killed`, whatever the exit', () => {
    const outcome = classifyExit({ ...none, destroyRequested: true }, known(null, 'SIGKILL'), false)
    assert.deepEqual(outcome, { state: 'destroyed', exit: { cause: 'killed', code: null, signal: 'SIGKILL' }, reason: 'VMM killed on request' })
  })

  it('a kill at the stop deadline is `stop-deadline`, even if the agent only finds out after a restart', () => {
    const pendingKill = { cause: 'stop-deadline' as const, reason: 'stop grace period expired; VMM killed' }
    for (const observed of [known(null, 'SIGKILL'), unknown]) {
      const outcome = classifyExit({ ...none, pendingKill }, observed, false)
      assert.equal(outcome.state, 'destroyed')
      assert.equal(outcome.exit.cause, 'stop-deadline')
      assert.equal(outcome.reason, 'stop grace period expired; VMM killed')
    }
  })

  it('a guest that powered off just before the deadline kill is a power-off, not a kill', () => {
    const outcome = classifyExit({ ...none, pendingKill: { cause: 'stop-deadline', reason: 'r' } }, known(0), false)
    assert.equal(outcome.exit.cause, 'guest-poweroff')
  })

  it('a failed boot is `failed` / `boot-failed` with the recorded reason', () => {
    const outcome = classifyExit({ ...none, pendingKill: { cause: 'boot-failed', reason: 'boot failed: x' } }, known(null, 'SIGKILL'), false)
    assert.deepEqual(outcome, { state: 'failed', exit: { cause: 'boot-failed', code: null, signal: 'SIGKILL' }, reason: 'boot failed: x' })
  })

  it('exit 0 is the guest powering off', () => {
    assert.deepEqual(classifyExit(none, known(0), false), {
      state: 'destroyed', exit: { cause: 'guest-poweroff', code: 0, signal: null }, reason: 'guest powered off'
    })
  })

  it('a non-zero exit or a signal nobody sent is a crash', () => {
    assert.deepEqual(classifyExit(none, known(3), false), {
      state: 'failed', exit: { cause: 'crashed', code: 3, signal: null }, reason: 'VMM exited with code 3'
    })
    assert.equal(classifyExit(none, known(null, 'SIGSEGV'), false).reason, 'VMM killed by SIGSEGV')
  })

  it('a source that exits 0 after migration-finished is `migrated`, seen or not, even with a stop or a delete pending', () => {
    const migration = { role: 'source' as const, phase: 'finished' as const }
    assert.deepEqual(classifyExit({ ...none, migration }, known(0), false), {
      state: 'destroyed', exit: { cause: 'migrated', code: 0, signal: null }, reason: 'the VM left by live migration; the VMM exited'
    })
    assert.equal(classifyExit({ ...none, migration }, unknown, true).exit.cause, 'migrated')
    assert.equal(classifyExit({ ...none, migration, destroyRequested: true }, known(0), false).exit.cause, 'migrated')
    assert.equal(classifyExit({ ...none, migration, pendingKill: { cause: 'stop-deadline', reason: 'r' } }, known(0), false).exit.cause, 'migrated')
    assert.equal(classifyExit({ ...none, migration, destroyRequested: true }, known(null, 'SIGKILL'), false).exit.cause, 'killed', 'killed before it could exit')
    assert.equal(classifyExit({ ...none, migration: { role: 'source', phase: 'failed' } }, known(0), false).exit.cause, 'guest-poweroff')
    assert.equal(classifyExit({ ...none, migration: { role: 'source', phase: 'sending' } }, known(1), false).exit.cause, 'crashed', 'SIGTERM mid-migration exits 1')
  })

  it('a target killed after its receive failed is `failed` / `boot-failed`; one whose migration was cancelled is `destroyed` / `killed`', () => {
    const failed = classifyExit({ ...none, pendingKill: { cause: 'migration-failed', reason: 'migration receive failed: x' } }, known(null, 'SIGKILL'), false)
    assert.deepEqual(failed, { state: 'failed', exit: { cause: 'boot-failed', code: null, signal: 'SIGKILL' }, reason: 'migration receive failed: x' })
    const cancelled = classifyExit({ ...none, pendingKill: { cause: 'migration-cancelled', reason: 'migration cancelled' } }, unknown, false)
    assert.deepEqual(cancelled, { state: 'destroyed', exit: { cause: 'killed', code: null, signal: null }, reason: 'migration cancelled' })
  })

  it('an end nobody saw is a clean exit if the event file ends with vmm shutdown, else `vanished`', () => {
    assert.equal(classifyExit(none, unknown, true).exit.cause, 'guest-poweroff')
    const vanished = classifyExit(none, unknown, false)
    assert.equal(vanished.state, 'failed')
    assert.equal(vanished.exit.cause, 'vanished')
  })
})
