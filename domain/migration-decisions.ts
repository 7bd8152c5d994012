/**
 * What a live migration decides from what it knows: the pure half of workflows/migrate.ts, which
 * has the theory of operation and carries these decisions out.
 *
 * - `transferEnding`: from both sides' reports, the requests and the agents' refusals, whether
 *   the transfer is over and how: committed (the target has the VM), or failed or cancelled
 *   (the VM stays on the source).
 * - `progressMark`, `msUntilGivingUp`, `timeoutFailure`: KubeVirt's timeouts, no progress for a
 *   while or too long in all (domain/migration.ts `MigrationSettings`).
 * - `nextSourceWait`: past the commit point, how long the source may take to go by itself before
 *   it is killed, so that the guest runs in one place (docs/design.md §15).
 */
import { completionTimeoutMs, type MigrationRecordPhase, type MigrationSettings } from './migration.js'
import { isTerminalVmmState, type MigrationHalfPhase, type VmmMigration, type VmmRecord } from './vmm.js'

export interface MigrationFailure {
  status: Extract<MigrationRecordPhase, 'failed' | 'cancelled'>
  code: 'MigrationCancelled' | 'MigrationFailed' | 'MigrationTimedOut' | 'MigrationLost' | 'NoCapacity' | 'InstanceDestroyed'
  message: string
}

/** How the transfer ended: the target has the VM, or not (and why). */
export type TransferEnding = { committed: true } | { committed: false, failure: MigrationFailure }

/** What the transfer's ending is decided from. */
export interface TransferFacts {
  migrationId: string
  /** Each side's VMM as last reported (null: not known yet). */
  source: VmmRecord | null
  target: VmmRecord | null
  /** Who asked to cancel the migration, if anyone did. */
  cancelRequestedBy: string | null
  /** Why the target's agent refused to make the target, if it did. */
  targetRefused: string | null
  /** Why the source's agent refused to send, if it did. */
  sendRefused: string | null
  /** Whether the send was issued (a source half reported before it is not this transfer's). */
  sendIssued: boolean
}

/**
 * The transfer's ending, or null while it goes on. The target's word comes first: once it has
 * the VM (its half `finished`, or the source exited having handed the VM over) nothing else
 * matters, a cancel included; a cancel comes before any failure, which it may have caused.
 */
export function transferEnding (facts: TransferFacts): TransferEnding | null {
  const { source, target } = facts
  if (halfOf(target, facts.migrationId)?.phase === 'finished') return { committed: true }
  if (source?.exit?.cause === 'migrated') return { committed: true }
  if (facts.cancelRequestedBy !== null) return failed('cancelled', 'MigrationCancelled', `cancelled by ${facts.cancelRequestedBy}`)
  if (facts.targetRefused !== null) return failed('failed', 'MigrationFailed', `the target's host refused it: ${facts.targetRefused}`)
  if (facts.sendRefused !== null) return failed('failed', 'MigrationFailed', `the source's host refused to send: ${facts.sendRefused}`)
  if (target !== null && (isTerminalVmmState(target.state) || target.migration?.phase === 'failed')) {
    return failed('failed', 'MigrationFailed', `the target VMM failed: ${target.migration?.reason ?? target.reason ?? target.state}`)
  }
  if (source !== null && isTerminalVmmState(source.state)) {
    return failed('failed', 'MigrationFailed', `the source VMM ended during the migration: ${source.reason ?? source.state}`)
  }
  const sent = halfOf(source, facts.migrationId)
  if (facts.sendIssued && sent?.phase === 'failed') return failed('failed', 'MigrationFailed', `the send failed: ${sent.reason ?? 'no reason given'}`)
  return null
}

function failed (status: MigrationFailure['status'], code: MigrationFailure['code'], message: string): TransferEnding {
  return { committed: false, failure: { status, code, message } }
}

/** A VMM's half of this migration, as its agent last reported it; null if it has none of this one. */
export function halfOf (vmm: Pick<VmmRecord, 'migration'> | null, migrationId: string): VmmMigration | null {
  const migration = vmm?.migration ?? null
  return migration?.id === migrationId ? migration : null
}

/** The target listens: the source may send. */
export function isTargetReady (target: VmmMigration | null): boolean {
  return target?.phase === 'ready' || target?.phase === 'receiving'
}

/**
 * What counts as progress, as a mark that changes when there is some: a new phase on either side,
 * or a memory iteration sent.
 */
export function progressMark (source: VmmMigration | null, target: VmmMigration | null): string {
  return `${target?.phase ?? '-'}/${source?.phase ?? '-'}/${source?.iterations ?? 0}`
}

/** When the migration began, and when it last made progress (epoch ms). */
export interface MigrationClock {
  startedAt: number
  progressAt: number
}

/** How long until the migration gives up, at `now` (≤ 0: it has). */
export function msUntilGivingUp (clock: MigrationClock, now: number, settings: MigrationSettings, memoryMiB: number): number {
  const noProgressAt = clock.progressAt + settings.progressTimeoutMs
  const overAt = clock.startedAt + completionTimeoutMs(settings, memoryMiB)
  return Math.min(noProgressAt, overAt) - now
}

/** Why a migration that gave up at `now` did: no progress for a while, or too long in all. */
export function timeoutFailure (clock: MigrationClock, now: number, settings: MigrationSettings, memoryMiB: number): MigrationFailure {
  const message = now >= clock.progressAt + settings.progressTimeoutMs
    ? `no progress for ${settings.progressTimeoutMs / 1000} s`
    : `not complete within ${completionTimeoutMs(settings, memoryMiB) / 1000} s (${settings.completionMsPerGiB / 1000} s per GiB of memory)`
  return { status: 'cancelled', code: 'MigrationTimedOut', message }
}

/**
 * After the commit point, how long a source still `sending` has to hear the target's
 * acknowledgement: Cloud Hypervisor has paused its VM for the downtime meanwhile, so nothing runs
 * there.
 */
export const SOURCE_ACK_WAIT_MS = 2_000
/** After the commit point, how long a source that handed the VM over has to exit by itself. */
export const SOURCE_EXIT_WAIT_MS = 10_000

/** What a committed migration waits for its source to do: hear the acknowledgement, or exit. */
export type SourceWait = { for: 'acknowledgement' | 'exit', ms: number }

/**
 * Past the commit point, the next wait the source is given, from its half's phase now and the
 * waits it has had; null: it is killed unless it is gone. A source still `sending` (paused by
 * Cloud Hypervisor for the downtime) gets the moment an acknowledgement takes; one that handed
 * the VM over (`finished`) gets the moment its exit takes; one whose send failed (`held`, paused
 * by its agent, or `failed`, resumed) is killed at once: the target has the VM.
 */
export function nextSourceWait (phase: MigrationHalfPhase | null, had: ReadonlyArray<SourceWait['for']>): SourceWait | null {
  if (phase === 'sending' && had.length === 0) return { for: 'acknowledgement', ms: SOURCE_ACK_WAIT_MS }
  if (phase === 'finished' && !had.includes('exit')) return { for: 'exit', ms: SOURCE_EXIT_WAIT_MS }
  return null
}
