/**
 * A live migration's decisions (domain/migration-decisions.ts), case by case from tables: how a
 * transfer ends from what both sides reported, its timeouts, and the waits a committed
 * migration's source gets before it is killed, so that one guest never runs in two places.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  msUntilGivingUp, nextSourceWait, progressMark, SOURCE_ACK_WAIT_MS, SOURCE_EXIT_WAIT_MS, timeoutFailure, transferEnding,
  type SourceWait, type TransferFacts
} from '../../../domain/migration-decisions.js'
import type { MigrationHalfPhase, VmmExitCause, VmmRecord, VmmState } from '../../../domain/vmm.js'

const MIGRATION = 'mig-1'

interface SideCase {
  state?: VmmState
  phase?: MigrationHalfPhase
  exit?: VmmExitCause
  /** The half belongs to another migration. */
  otherMigration?: true
  reason?: string
}

function vmm (id: string, side: SideCase | null, role: 'source' | 'target'): VmmRecord | null {
  if (side === null) return null
  return {
    id,
    instanceId: 'i-1',
    hostId: role === 'source' ? 'host-1' : 'host-2',
    state: side.state ?? 'running',
    generation: 3,
    reason: side.reason ?? null,
    exit: side.exit === undefined ? null : { cause: side.exit, code: 0, signal: null },
    unresponsiveSince: null,
    runningSince: null,
    migration: side.phase === undefined
      ? null
      : { id: side.otherMigration === true ? 'mig-0' : MIGRATION, role, phase: side.phase, receiverUrl: null, iterations: 0, progressAt: '2026-11-27T00:00:00Z', reason: side.reason ?? null },
    createdAt: '2026-11-27T00:00:00Z',
    updatedAt: '2026-11-27T00:00:00Z',
    destroyedAt: null
  }
}

function facts (source: SideCase | null, target: SideCase | null, more: Partial<TransferFacts> = {}): TransferFacts {
  return {
    migrationId: MIGRATION,
    source: vmm('vmm-s', source, 'source'),
    target: vmm('vmm-t', target, 'target'),
    cancelRequestedBy: null,
    targetRefused: null,
    sendRefused: null,
    sendIssued: true,
    ...more
  }
}

describe('transferEnding', () => {
  const cases: Array<{ name: string, facts: TransferFacts, ending: 'goes on' | 'committed' | string }> = [
    { name: 'both sides still moving', facts: facts({ phase: 'sending' }, { phase: 'receiving' }), ending: 'goes on' },
    { name: 'the target not yet known', facts: facts({}, null, { sendIssued: false }), ending: 'goes on' },
    { name: 'the target finished receiving: the commit point', facts: facts({ phase: 'sending' }, { phase: 'finished' }), ending: 'committed' },
    // One guest, one place: a lost acknowledgement leaves the source held or failed, the target has the VM.
    { name: 'the target finished while the source, its acknowledgement lost, is held', facts: facts({ phase: 'held' }, { phase: 'finished' }), ending: 'committed' },
    { name: 'the target finished while the source says its send failed', facts: facts({ phase: 'failed', reason: 'ack lost' }, { phase: 'finished' }), ending: 'committed' },
    { name: 'the target finished though a cancel was asked: too late, nothing is lost', facts: facts({ phase: 'sending' }, { phase: 'finished' }, { cancelRequestedBy: 'op-9' }), ending: 'committed' },
    { name: 'the source handed the VM over and exited before the target said so', facts: facts({ state: 'destroyed', exit: 'migrated', phase: 'finished' }, { phase: 'receiving' }), ending: 'committed' },
    { name: 'the target finished a different migration', facts: facts({ phase: 'sending' }, { phase: 'finished', otherMigration: true }), ending: 'goes on' },
    { name: 'a cancel', facts: facts({ phase: 'sending' }, { phase: 'receiving' }, { cancelRequestedBy: 'op-9' }), ending: 'cancelled MigrationCancelled: cancelled by op-9' },
    { name: 'a cancel comes before the failure it may cause', facts: facts({ phase: 'failed' }, { phase: 'failed' }, { cancelRequestedBy: 'op-9' }), ending: 'cancelled MigrationCancelled: cancelled by op-9' },
    { name: "the target's host refused", facts: facts({}, null, { targetRefused: 'no image', sendIssued: false }), ending: "failed MigrationFailed: the target's host refused it: no image" },
    { name: "the source's host refused to send", facts: facts({}, { phase: 'ready' }, { sendRefused: 'VMM not running' }), ending: "failed MigrationFailed: the source's host refused to send: VMM not running" },
    { name: 'the target VMM ended', facts: facts({ phase: 'sending' }, { state: 'failed', reason: 'crashed' }), ending: 'failed MigrationFailed: the target VMM failed: crashed' },
    { name: "the target's half failed", facts: facts({ phase: 'sending' }, { phase: 'failed', reason: 'receive failed' }), ending: 'failed MigrationFailed: the target VMM failed: receive failed' },
    { name: 'the source VMM ended without handing over', facts: facts({ state: 'failed', exit: 'crashed', reason: 'SIGSEGV' }, { phase: 'receiving' }), ending: 'failed MigrationFailed: the source VMM ended during the migration: SIGSEGV' },
    { name: 'the send failed', facts: facts({ phase: 'failed', reason: 'connection reset' }, { phase: 'receiving' }), ending: 'failed MigrationFailed: the send failed: connection reset' },
    { name: 'a failed send half before this send was issued is not this transfer’s', facts: facts({ phase: 'failed' }, { phase: 'ready' }, { sendIssued: false }), ending: 'goes on' },
    { name: 'a held source waits for the target’s word', facts: facts({ phase: 'held' }, { phase: 'receiving' }), ending: 'goes on' }
  ]
  for (const { name, facts, ending } of cases) {
    it(name, () => {
      const got = transferEnding(facts)
      const said = got === null ? 'goes on' : got.committed ? 'committed' : `${got.failure.status} ${got.failure.code}: ${got.failure.message}`
      assert.equal(said, ending)
    })
  }
})

describe('timeouts', () => {
  const settings = { progressTimeoutMs: 30_000, completionMsPerGiB: 60_000, downtimeMs: 300 }
  const cases: Array<{ name: string, memoryMiB: number, startedAt: number, progressAt: number, now: number, left: number, why?: string }> = [
    { name: 'progress a moment ago', memoryMiB: 1024, startedAt: 0, progressAt: 10_000, now: 11_000, left: 29_000 },
    { name: 'no progress for the whole progress timeout', memoryMiB: 1024, startedAt: 0, progressAt: 10_000, now: 40_000, left: 0, why: 'no progress for 30 s' },
    { name: 'progress all along, past the completion bound', memoryMiB: 1024, startedAt: 0, progressAt: 59_000, now: 60_000, left: 0, why: 'not complete within 60 s (60 s per GiB of memory)' },
    { name: 'the completion bound grows with memory', memoryMiB: 4096, startedAt: 0, progressAt: 200_000, now: 220_000, left: 10_000 },
    { name: 'a small VM gets at least one GiB’s worth', memoryMiB: 256, startedAt: 0, progressAt: 50_000, now: 55_000, left: 5_000 }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const clock = { startedAt: c.startedAt, progressAt: c.progressAt }
      assert.equal(msUntilGivingUp(clock, c.now, settings, c.memoryMiB), c.left)
      if (c.why !== undefined) {
        assert.deepEqual(timeoutFailure(clock, c.now, settings, c.memoryMiB), { status: 'cancelled', code: 'MigrationTimedOut', message: c.why })
      }
    })
  }

  it('progress is a new phase on either side or a memory iteration', () => {
    const half = (phase: MigrationHalfPhase, iterations = 0) => ({ id: MIGRATION, role: 'source' as const, phase, receiverUrl: null, iterations, progressAt: '', reason: null })
    const marks = [
      progressMark(null, null),
      progressMark(null, half('preparing')),
      progressMark(null, half('ready')),
      progressMark(half('sending'), half('ready')),
      progressMark(half('sending', 1), half('ready')),
      progressMark(half('sending', 1), half('receiving'))
    ]
    assert.equal(new Set(marks).size, marks.length, `every step is progress: ${marks.join(', ')}`)
    assert.equal(progressMark(half('sending', 2), half('receiving')), progressMark(half('sending', 2), half('receiving')))
  })
})

describe('nextSourceWait: past the commit point, the guest runs in one place', () => {
  const cases: Array<{ name: string, phases: Array<MigrationHalfPhase | null>, waits: Array<SourceWait['for']> }> = [
    { name: 'a source that handed the VM over is given the moment its exit takes', phases: ['finished', 'finished'], waits: ['exit'] },
    { name: 'a source still sending is given the acknowledgement’s moment, then its exit', phases: ['sending', 'finished', 'finished'], waits: ['acknowledgement', 'exit'] },
    { name: 'a source still sending after the acknowledgement’s moment is killed', phases: ['sending', 'sending'], waits: ['acknowledgement'] },
    { name: 'a source whose send failed past the downtime (held) is killed at once', phases: ['held'], waits: [] },
    { name: 'a source whose send failed and resumed is killed at once', phases: ['failed'], waits: [] },
    { name: 'a source that learns it failed while waiting for the acknowledgement is killed', phases: ['sending', 'held'], waits: ['acknowledgement'] },
    { name: 'a source with no half of this migration is killed at once', phases: [null], waits: [] }
  ]
  for (const { name, phases, waits } of cases) {
    it(name, () => {
      const had: Array<SourceWait['for']> = []
      for (const phase of phases) {
        const wait = nextSourceWait(phase, had)
        if (wait === null) break
        assert.equal(wait.ms, wait.for === 'exit' ? SOURCE_EXIT_WAIT_MS : SOURCE_ACK_WAIT_MS)
        had.push(wait.for)
      }
      assert.deepEqual(had, waits)
      assert.equal(nextSourceWait(phases.at(-1) ?? null, had), null, 'the waits end: the source is then killed unless gone')
    })
  }
})
