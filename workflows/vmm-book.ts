/**
 * What an instance's execution knows of its VMMs, and the reports it has not recorded yet.
 *
 * A report (a host agent's signal, or an agent's answer to a call) is taken in at once, in
 * memory, by the same rule PostgreSQL applies (`withReport`): operations decide on it in the
 * same workflow task. It is recorded with the execution's next write, in the same transaction
 * (activities/instance-records.ts), or on its own when nothing else is to be written; the
 * execution ends only once every report it received is recorded (I5).
 *
 * A report of a VMM the execution does not know yet waits with the unrecorded ones and is applied
 * once it does: a placement that made its VMM can be answered after the VMM's agent has reported.
 *
 * A report that changes neither the VMM's state, its responsiveness nor its migration's progress
 * (a VMM known to be starting says it is starting, with a new reason) is "insignificant": an
 * operation waiting for something else lets it wait for the next write instead of writing it alone.
 */
import { patched } from '@temporalio/workflow'
import { isTerminalVmmState, withReport, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { EARLY_REPORTS_PATCH, RECORDED_END_IS_FINAL_PATCH } from './patches.js'

export class VmmBook {
  private readonly records = new Map<string, VmmRecord>()
  private unrecorded: VmmReport[] = []
  private significant = false

  /** Takes in a report: in memory now, to be recorded with the next write. */
  take (report: VmmReport): void {
    this.unrecorded.push(report)
    this.apply(report)
  }

  /** Applies a report to the VMM's record in memory, if the VMM is known and the report is news. */
  private apply (report: VmmReport): void {
    const known = this.records.get(report.vmmId)
    const next = known === undefined ? null : withReport(known, report)
    if (known === undefined || next === null) return
    this.records.set(next.id, next)
    if (next.state !== known.state || next.unresponsiveSince !== known.unresponsiveSince || movedMigration(known, next)) this.significant = true
  }

  /**
   * Takes in a record read from PostgreSQL, unless memory already holds a newer one. A record
   * that is terminal is final whatever its generation (a host's fence writes it without one, and
   * PostgreSQL never brings a VMM back), so memory never holds a VMM live that PostgreSQL holds
   * gone.
   */
  remember (vmm: VmmRecord): void {
    const known = this.records.get(vmm.id)
    if (known === undefined || vmm.generation >= known.generation || (endsLiveVmm(known, vmm) && patched(RECORDED_END_IS_FINAL_PATCH))) {
      this.records.set(vmm.id, vmm)
    }
    if (known === undefined && this.unrecorded.some((report) => report.vmmId === vmm.id) && patched(EARLY_REPORTS_PATCH)) this.applyEarlyReports(vmm.id)
  }

  /**
   * Applies the reports of a VMM taken in before the execution knew it: a placement that made its
   * VMM (start.ts step 3) can be answered after the VMM's agent has reported it running.
   */
  private applyEarlyReports (vmmId: string): void {
    for (const report of this.unrecorded) if (report.vmmId === vmmId) this.apply(report)
  }

  get (vmmId: string): VmmRecord | null {
    return this.records.get(vmmId) ?? null
  }

  /** The instance's VMMs that are not confirmed gone. */
  live (instanceId: string): VmmRecord[] {
    return [...this.records.values()].filter((v) => v.instanceId === instanceId && !isTerminalVmmState(v.state))
  }

  isGone (vmmId: string): boolean {
    const vmm = this.get(vmmId)
    return vmm !== null && isTerminalVmmState(vmm.state)
  }

  isRunning (vmmId: string): boolean {
    return this.get(vmmId)?.state === 'running'
  }

  /** How many reports are not recorded yet. */
  unrecordedCount (): number {
    return this.unrecorded.length
  }

  hasUnrecorded (): boolean {
    return this.unrecorded.length > 0
  }

  /** Whether a report not yet recorded changed what people would see. */
  hasSignificantUnrecorded (): boolean {
    return this.significant
  }

  /** The reports not yet recorded, handed to the write that records them. */
  takeUnrecorded (): VmmReport[] {
    this.significant = false
    return this.unrecorded.splice(0)
  }
}

/** PostgreSQL holds gone a VMM that memory holds live. */
function endsLiveVmm (known: VmmRecord, recorded: VmmRecord): boolean {
  return isTerminalVmmState(recorded.state) && !isTerminalVmmState(known.state)
}

/** A migration's half took a step or sent a memory iteration: its progress shows at once. */
function movedMigration (known: VmmRecord, next: VmmRecord): boolean {
  return next.migration?.phase !== known.migration?.phase || next.migration?.iterations !== known.migration?.iterations
}
