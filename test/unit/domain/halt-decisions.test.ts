/**
 * A stop's decisions (domain/halt-decisions.ts), from tables: its escalation for one VMM (press,
 * wait, kill; stop always terminates, I1) and how the halt's end is told.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { haltEnd, nextStopStep, type StopFacts, type StopStep } from '../../../domain/halt-decisions.js'
import type { VmmExitCause, VmmState } from '../../../domain/vmm.js'

describe('nextStopStep', () => {
  const BACKSTOP = 2_000
  const cases: Array<{ name: string, facts: Omit<StopFacts, 'killBackstopMs'>, step: StopStep }> = [
    { name: 'a deadline ahead, not yet told: tell the agent, wait until a backstop past it', facts: { now: 0, deadline: 10_000, toldAgent: null }, step: { kill: false, tellAgent: 10_000, killAt: 12_000 } },
    { name: 'a deadline ahead, told already: wait, telling nothing again', facts: { now: 5_000, deadline: 10_000, toldAgent: 10_000 }, step: { kill: false, tellAgent: null, killAt: 12_000 } },
    { name: 'a lowered deadline (a second stop with less grace) is told again', facts: { now: 5_000, deadline: 7_000, toldAgent: 10_000 }, step: { kill: false, tellAgent: 7_000, killAt: 9_000 } },
    { name: 'a told deadline just passed: the agent kills at it; wait for its report', facts: { now: 10_500, deadline: 10_000, toldAgent: 10_000 }, step: { kill: false, tellAgent: null, killAt: 12_000 } },
    { name: 'a told deadline past the backstop: kill', facts: { now: 12_000, deadline: 10_000, toldAgent: 10_000 }, step: { kill: true } },
    { name: 'a deadline that passed before the agent was told: kill at once', facts: { now: 10_000, deadline: 10_000, toldAgent: null }, step: { kill: true } },
    { name: 'a force-stop (deadline now, grace 0): kill at once', facts: { now: 3_000, deadline: 3_000, toldAgent: 10_000 }, step: { kill: true } },
    { name: 'no deadline left: kill', facts: { now: 0, deadline: null, toldAgent: null }, step: { kill: true } }
  ]
  for (const { name, facts, step } of cases) {
    it(name, () => {
      assert.deepEqual(nextStopStep({ ...facts, killBackstopMs: BACKSTOP }), step)
    })
  }

  it('always ends in a kill as time passes, whatever the agent was told', () => {
    for (const toldAgent of [null, 10_000]) {
      let now = 0
      let told = toldAgent
      for (let i = 0; i < 10; i++) {
        const step = nextStopStep({ now, deadline: 10_000, toldAgent: told, killBackstopMs: BACKSTOP })
        if (step.kill) break
        told = step.tellAgent ?? told
        now = step.killAt
      }
      assert.ok(now <= 12_000 && nextStopStep({ now, deadline: 10_000, toldAgent: told, killBackstopMs: BACKSTOP }).kill)
    }
  })
})

describe('haltEnd', () => {
  const vmm = (state: VmmState, cause: VmmExitCause | null, reason: string | null = null) =>
    ({ state, hostId: 'host-1', exit: cause === null ? null : { cause, code: 0, signal: null }, reason })
  const asked = { forcedBy: undefined, graceSeconds: 30 }
  const cases: Array<{ name: string, vmms: Array<ReturnType<typeof vmm>>, asked?: typeof asked | { forcedBy: string, graceSeconds: number }, message: string, error: string | null }> = [
    { name: 'nothing ran', vmms: [], message: 'no VMM was running', error: null },
    { name: 'the guest powered off', vmms: [vmm('destroyed', 'guest-poweroff')], message: 'guest powered off', error: null },
    { name: 'killed at the deadline', vmms: [vmm('destroyed', 'stop-deadline')], message: 'grace period of 30 s expired; VMM killed', error: 'StopForced' },
    { name: 'killed by the kill branch', vmms: [vmm('destroyed', 'killed')], message: 'grace period of 30 s expired; VMM killed', error: 'StopForced' },
    { name: 'force-stopped by an operator', vmms: [vmm('destroyed', 'killed')], asked: { forcedBy: 'alice: stuck', graceSeconds: 0 }, message: 'forced by alice: stuck; VMM killed', error: 'StopForced' },
    { name: 'its host declared lost', vmms: [vmm('lost', null)], message: 'host host-1 declared lost; VMM fenced, not seen to stop', error: 'HostLost' },
    { name: 'a lost target beside a source that powered off (a halt mid-migration)', vmms: [vmm('destroyed', 'guest-poweroff'), vmm('lost', null)], message: 'host host-1 declared lost; VMM fenced, not seen to stop', error: 'HostLost' },
    { name: 'a VMM that crashed during the stop', vmms: [vmm('failed', 'crashed', 'exited with code 3')], message: 'VMM ended during the stop: exited with code 3', error: null }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const end = haltEnd(c.vmms, c.asked ?? asked)
      assert.equal(end.message, c.message)
      assert.equal(end.error?.code ?? null, c.error)
      if (end.error !== null) assert.equal(end.error.message, end.message)
    })
  }
})
