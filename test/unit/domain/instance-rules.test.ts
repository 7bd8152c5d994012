import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { convergenceFor, outcomeOfVmmEnd, planRestart, verdictFor } from '../../../domain/instance-rules.js'
import type { VmmExit, VmmState } from '../../../domain/vmm.js'

function ended (state: VmmState, exit: VmmExit | null, reason: string | null = null) {
  return { state, exit, reason, hostId: 'host-1' }
}

describe('outcomeOfVmmEnd', () => {
  it('a guest that powered itself off leaves the instance stopped, and stopped is what the user now intends', () => {
    const outcome = outcomeOfVmmEnd(ended('destroyed', { cause: 'guest-poweroff', code: 0, signal: null }))
    assert.equal(outcome.state, 'stopped')
    assert.equal(outcome.intendedState, 'stopped')
    assert.equal(outcome.error, null)
  })

  it('a crash fails the instance and names the exit code or signal', () => {
    const byCode = outcomeOfVmmEnd(ended('failed', { cause: 'crashed', code: 3, signal: null }))
    assert.equal(byCode.state, 'failed')
    assert.deepEqual(byCode.error, { code: 'VmmCrashed', message: 'VMM exited with code 3' })
    const bySignal = outcomeOfVmmEnd(ended('failed', { cause: 'crashed', code: null, signal: 'SIGSEGV' }))
    assert.equal(bySignal.error?.message, 'VMM killed by SIGSEGV')
    assert.equal(bySignal.intendedState, undefined, 'a crash does not change what the user intends')
  })

  it('a VMM its host fenced (its lease lapsed) fails the instance with HostLost, in the host\'s words', () => {
    const outcome = outcomeOfVmmEnd(ended('failed', { cause: 'fenced', code: null, signal: 'SIGKILL' }, 'host lease lapsed and 3 of 3 peers hold theirs, 0 did not answer: host fenced'))
    assert.equal(outcome.state, 'failed')
    assert.deepEqual(outcome.error, { code: 'HostLost', message: 'host host-1 fenced itself, its lease lapsed: host lease lapsed and 3 of 3 peers hold theirs, 0 did not answer: host fenced' })
  })

  it('a VMM whose host was declared lost fails the instance with HostLost', () => {
    const outcome = outcomeOfVmmEnd(ended('lost', null))
    assert.equal(outcome.state, 'failed')
    assert.equal(outcome.error?.code, 'HostLost')
  })

  it('a VMM that died while its agent was away fails the instance, saying the exit status is unknown', () => {
    const outcome = outcomeOfVmmEnd(ended('failed', { cause: 'vanished', code: null, signal: null }))
    assert.equal(outcome.error?.code, 'VmmVanished')
    assert.match(outcome.error?.message ?? '', /unknown/)
  })

  it('a boot failure carries the agent’s reason', () => {
    const outcome = outcomeOfVmmEnd(ended('failed', { cause: 'boot-failed', code: null, signal: null }, 'Error loading kernel'))
    assert.deepEqual(outcome.error, { code: 'BootFailed', message: 'Error loading kernel' })
  })
})

describe('verdictFor', () => {
  it('runs what can proceed', () => {
    assert.equal(verdictFor('start', 'stopped', null).verdict, 'run')
    assert.equal(verdictFor('start', 'failed', null).verdict, 'run')
    assert.equal(verdictFor('reboot', 'running', null).verdict, 'run')
    assert.equal(verdictFor('stop', 'running', null).verdict, 'run')
    assert.equal(verdictFor('stop', 'failed', null).verdict, 'run', 'stop on a failed instance moves it to stopped')
  })

  it('lets stop and delete preempt anything in flight, even before its workflow wrote a state', () => {
    for (const state of ['creating', 'starting', 'rebooting', 'stopping'] as const) {
      assert.equal(verdictFor('stop', state, 'start').verdict, 'run')
      assert.equal(verdictFor('delete', state, 'start').verdict, 'run')
    }
    assert.equal(verdictFor('stop', 'stopped', 'start').verdict, 'run', 'a start accepted a moment ago is stopped, not ignored')
  })

  it('answers requests that need nothing done as no-ops', () => {
    assert.deepEqual(verdictFor('stop', 'stopped', null), { verdict: 'noop', reason: 'instance is already stopped' })
    assert.deepEqual(verdictFor('start', 'running', null), { verdict: 'noop', reason: 'instance is already running' })
    assert.equal(verdictFor('delete', 'destroyed', null).verdict, 'noop')
  })

  it('refuses what cannot apply, naming the state or the operation in flight', () => {
    assert.deepEqual(verdictFor('start', 'stopping', null), { verdict: 'conflict', reason: 'cannot start an instance that is stopping' })
    assert.deepEqual(verdictFor('reboot', 'stopped', null), { verdict: 'conflict', reason: 'cannot reboot an instance that is stopped' })
    assert.deepEqual(verdictFor('start', 'stopped', 'stop'), { verdict: 'conflict', reason: 'cannot start while a stop is in flight' })
    assert.deepEqual(verdictFor('reboot', 'running', 'reboot'), { verdict: 'conflict', reason: 'cannot reboot while a reboot is in flight' })
    assert.equal(verdictFor('start', 'destroyed', null).verdict, 'conflict')
  })
})

describe('planRestart (restart policy on-failure)', () => {
  const backoff = { restartBackoffMs: 10_000, restartBackoffMaxMs: 300_000, restartResetMs: 600_000 }
  const now = Date.parse('2026-11-22T12:00:00Z')
  const crashed = outcomeOfVmmEnd(ended('failed', { cause: 'crashed', code: 1, signal: null }))
  const onFailure = { restartPolicy: 'on-failure' as const, onHostFailure: 'fail' as const, intendedState: 'running' as const, restartAttempts: 0 }
  const ranFor = (ms: number) => ({ runningSince: new Date(now - ms).toISOString() })

  it('waits 10 s, then twice as long with each restart in a row, at most 5 min', () => {
    const delays = [0, 1, 2, 3, 4, 5, 6].map((restartAttempts) => planRestart({ ...onFailure, restartAttempts }, ranFor(1000), crashed, backoff, now)!.at - now)
    assert.deepEqual(delays, [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000])
    assert.equal(planRestart({ ...onFailure, restartAttempts: 2 }, ranFor(1000), crashed, backoff, now)?.attempts, 3)
  })

  it('starts the count over after 10 min of running', () => {
    const plan = planRestart({ ...onFailure, restartAttempts: 5 }, ranFor(600_000), crashed, backoff, now)
    assert.deepEqual(plan, { at: now + 10_000, attempts: 1, policy: 'restart policy on-failure' })
  })

  it('does not count a failure that was not the guest’s: a host declared lost', () => {
    const lost = outcomeOfVmmEnd(ended('lost', null))
    assert.deepEqual(planRestart({ ...onFailure, restartAttempts: 2 }, ranFor(1000), lost, backoff, now), { at: now + 40_000, attempts: 2, policy: 'restart policy on-failure' })
  })

  it('restarts at once after its host is declared lost or fenced itself, with onHostFailure restart, whatever its restart policy', () => {
    const lost = outcomeOfVmmEnd(ended('lost', null))
    const fenced = outcomeOfVmmEnd(ended('failed', { cause: 'fenced', code: null, signal: 'SIGKILL' }))
    for (const outcome of [lost, fenced]) {
      for (const restartPolicy of ['never', 'on-failure'] as const) {
        assert.deepEqual(planRestart({ ...onFailure, restartPolicy, onHostFailure: 'restart', restartAttempts: 3 }, ranFor(1000), outcome, backoff, now), { at: now, attempts: 3, policy: 'on host failure: restart' })
      }
    }
    assert.equal(planRestart({ ...onFailure, onHostFailure: 'restart' }, ranFor(1000), crashed, backoff, now)?.at, now + 10_000, 'a crash is the guest\'s: the back-off holds')
  })

  it('leaves it failed after its host\'s loss with onHostFailure fail and restart policy never, and never restarts what the user wants stopped', () => {
    const lost = outcomeOfVmmEnd(ended('lost', null))
    assert.equal(planRestart({ ...onFailure, restartPolicy: 'never' }, ranFor(1000), lost, backoff, now), null)
    assert.equal(planRestart({ ...onFailure, onHostFailure: 'restart', intendedState: 'stopped' }, ranFor(1000), lost, backoff, now), null)
  })

  it('never restarts with policy never, a guest that powered off, or a user who wants it stopped', () => {
    assert.equal(planRestart({ ...onFailure, restartPolicy: 'never' }, ranFor(1000), crashed, backoff, now), null)
    const poweredOff = outcomeOfVmmEnd(ended('destroyed', { cause: 'guest-poweroff', code: 0, signal: null }))
    assert.equal(planRestart(onFailure, ranFor(1000), poweredOff, backoff, now), null)
    assert.equal(planRestart({ ...onFailure, intendedState: 'stopped' }, ranFor(1000), crashed, backoff, now), null)
  })
})

describe('convergenceFor (the reconciler re-driving intent)', () => {
  it('finishes what a crash left half done', () => {
    assert.equal(convergenceFor('starting', 'running'), 'start')
    assert.equal(convergenceFor('creating', 'running'), 'start')
    assert.equal(convergenceFor('rebooting', 'running'), 'start')
    assert.equal(convergenceFor('migrating', 'running'), 'migrate', 'a migration is carried on, never replaced by a start')
    assert.equal(convergenceFor('migrating', 'stopped'), 'stop')
    assert.equal(convergenceFor('stopping', 'stopped'), 'stop')
    assert.equal(convergenceFor('stopping', 'destroyed'), 'delete')
    assert.equal(convergenceFor('creating', 'stopped'), 'stop')
  })

  it('brings a settled instance to its intent', () => {
    assert.equal(convergenceFor('running', 'stopped'), 'stop')
    assert.equal(convergenceFor('stopped', 'running'), 'start')
    assert.equal(convergenceFor('stopped', 'destroyed'), 'delete')
    assert.equal(convergenceFor('failed', 'destroyed'), 'delete')
  })

  it('leaves alone what already meets its intent, and failed instances', () => {
    assert.equal(convergenceFor('running', 'running'), null)
    assert.equal(convergenceFor('stopped', 'stopped'), null)
    assert.equal(convergenceFor('destroyed', 'destroyed'), null)
    assert.equal(convergenceFor('failed', 'running'), null)
  })
})
