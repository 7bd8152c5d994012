/**
 * Theory of operation: live migration.
 *
 * A migration moves a running instance's VM from its active VMM (the source) to a new VMM on
 * another host (the target) with Cloud Hypervisor's precopy live migration
 * (`../shared/reference/cloud-hypervisor-notes.md` §6, §9). It is an operation of the instance,
 * run under `instance-<id>` like any other (execution.ts), so nothing else changes the instance
 * meanwhile (I4), and a stop or delete preempts it.
 *
 * 1. Begin: the migration's record (its ID is the operation's) names the source; the instance
 *    reads `migrating`.
 * 2. Reserve: the target VMM (its ID named by the operation's placement decision), its host and
 *    its reservation, in one write. The instance's active VMM stays the source.
 * 3. Prepare and start the target: its agent finds the disks and the seed in the shared storage
 *    (the paths the VM config in the migration stream names), makes the TAPs (the same names: they
 *    derive from the interfaces' IDs), starts an empty VMM and issues `vm.receive-migration` on a
 *    connection of its own; it reports `ready` with the URL it listens at, chosen and recorded
 *    before it listens.
 * 4. Send: the source's agent issues `vm.send-migration`; the source's memory iterations arrive
 *    as reports, recorded as they come: they are the progress.
 * 5. Commit: the target reporting its half `finished` (`migration-receive-finished`, or the 204
 *    of its receive) is the commit point: the VM runs there now. The next write makes the target
 *    the active VMM and the migration `committed`, in one transaction, before anything else is
 *    done. Then the source must be confirmed gone: it exits 0 after `migration-finished`, or it
 *    is killed, at once when its send failed (the acknowledgement was lost: the target wins).
 * 6. Before the commit point, on failure, cancel or timeout: the target is cancelled. Its agent
 *    kills it unless it has finished receiving, in which case the migration commits after all (a
 *    cancel that comes too late loses nothing). Then the source is confirmed running (its send
 *    fails once the target is gone, and the VM resumes there; a source its agent holds paused is
 *    resumed now), and the operation fails with the instance `running` on the source.
 *
 * The guest runs in one place (docs/design.md §15). A source whose send failed after the downtime
 * began may have handed the VM over without hearing so: its agent pauses it (its half `held`),
 * needing nothing from here, and this decides from the target's half: the target wins when it
 * finished (the source is killed), or the held source is resumed. The send's and the cancel's
 * calls run beside the reading of both sides' reports: a host that does not answer holds up
 * neither a cancel, a timeout, nor the target's commit, only what needs its own word.
 *
 * A migration resumes from its record. An execution that finds its migration recorded (reset,
 * interrupted and carried on by the reconciler) takes the source the record names, never the
 * active VMM (after the commit, the target), and goes on from the recorded phase.
 *
 * Timeouts follow KubeVirt: the migration is cancelled after `progressTimeoutMs` without
 * progress (a new phase on either side, or a memory iteration), or after `completionMsPerGiB`
 * per GiB of the VM's memory in all (domain/migration.ts).
 *
 * A source that exits having handed the VM over (`migrated`) means the target acknowledged the
 * final state: the target is then waited for, never cancelled. Should it be gone too, the VM is
 * lost with it, and the instance fails (instance-rules.ts, `MigrationLost`), from its disks its
 * restart policy may start it again.
 *
 * A stop or delete preempts the migration: the migration is recorded `aborted` with the
 * operation superseded, and the halt stops every live VMM of the instance, the target with the
 * source, kills each at the deadline, and records the instance stopped only once both are
 * confirmed gone (omicron #8755, #11107).
 */
import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation, patched } from '@temporalio/workflow'
import type { RecordedMigration } from '../contract/records.js'
import { decisionKeys } from '../domain/decisions.js'
import { completionTimeoutMs, isMigrationOver, type MigrationRecordPhase } from '../domain/migration.js'
import {
  halfOf, isTargetReady, msUntilGivingUp, nextSourceWait, progressMark, SOURCE_EXIT_WAIT_MS, timeoutFailure, transferEnding,
  type MigrationFailure, type SourceWait, type TransferEnding
} from '../domain/migration-decisions.js'
import { vmmSpecOf } from '../domain/instance.js'
import type { MigrateRequest } from '../domain/requests.js'
import { isFinalHalfPhase, type VmmMigration, type VmmRecord } from '../domain/vmm.js'
import { agents, reads } from './activity-proxies.js'
import type { ChangeInput, InstanceContext } from './instance-context.js'
import { MIGRATE_RESUMES_FROM_RECORD_PATCH, ONE_GUEST_ONE_PLACE_PATCH } from './patches.js'
import { describeFailure } from './start.js'
import { describeOnHost, destroyOnHost } from './vmm-actions.js'

/** After the target is killed, how long the source has to report its send failed before it is asked. */
const SOURCE_SETTLE_WAIT_MS = 30_000

export async function migrate (execution: InstanceContext, request: MigrateRequest): Promise<void> {
  // A migration this operation recorded already (its execution reset, retried or continued as
  // new) resumes from its record: its source is the one it recorded, whatever is active now.
  const recorded = patched(MIGRATE_RESUMES_FROM_RECORD_PATCH) ? await reads.readMigration(request.operationId) : null
  if (recorded !== null) {
    await resume(execution, request, recorded)
    return
  }
  const source = execution.activeVmm()
  const state = execution.instance.state
  if (source === null || source.state !== 'running' || state !== 'running') {
    await refuse(execution, request, `cannot migrate an instance that is ${state}`)
    return
  }
  if (request.targetHostId === source.hostId) {
    await refuse(execution, request, `the instance already runs on host ${source.hostId}`)
    return
  }
  await new Migration(execution, request, source).run()
}

/** Carries a recorded migration on to its end; one that ended has nothing left to do. */
async function resume (execution: InstanceContext, request: MigrateRequest, recorded: RecordedMigration): Promise<void> {
  if (isMigrationOver(recorded.phase)) return
  for (const vmm of [recorded.source, recorded.target]) if (vmm !== null) execution.remember(vmm)
  const migration = new Migration(execution, request, recorded.source, recorded.cancelRequested)
  if (recorded.phase === 'committed') await migration.finishCommitted(recorded.target!)
  else await migration.run()
}

async function refuse (execution: InstanceContext, request: MigrateRequest, message: string): Promise<void> {
  await execution.change({
    decision: decisionKeys.finished(request.operationId),
    kind: 'operation-finished',
    message,
    operation: { request, status: 'failed', error: { code: 'Conflict', message } }
  })
}

class Migration {
  private target: { vmmId: string, hostId: string } | null = null
  private sendIssued = false
  /** The send's call, running beside the wait for both sides' reports; cancelled at the ending. */
  private sendCall: CancellationScope | null = null
  /** The source's agent refused the send (its VMM no longer runs, say): why. */
  private sendRefused: string | null = null
  private progressMark = ''
  /** When the migration began and last made progress: what its timeouts measure. */
  private readonly clock = { startedAt: Date.now(), progressAt: Date.now() }
  /**
   * The guest runs in one place (module comment, docs/design.md §15): the send's and the
   * cancel's calls never hold up the reading of both sides, a source is killed once its target
   * has the VM, and a source its agent holds paused is resumed when the target does not.
   */
  private readonly onePlace = patched(ONE_GUEST_ONE_PLACE_PATCH)

  /** `cancelRecorded`: an earlier run of this operation recorded a cancel. */
  constructor (
    private readonly execution: InstanceContext,
    private readonly request: MigrateRequest,
    private readonly source: VmmRecord,
    private readonly cancelRecorded = false
  ) {}

  private get id (): string {
    return this.request.operationId
  }

  async run (): Promise<void> {
    await this.begin()
    const placement = await this.reserve()
    if ('reason' in placement) {
      await this.fail({ status: 'failed', code: placement.code, message: placement.reason })
      return
    }
    this.target = placement
    const ending = await this.transfer()
    if (ending.committed) {
      await this.commit()
      return
    }
    await this.abandon(ending.failure)
  }

  // --- steps 1 and 2 -------------------------------------------------------------------------

  private async begin (): Promise<void> {
    const to = this.request.targetHostId === undefined ? '' : ` to ${this.request.targetHostId}`
    this.execution.enterPhase('reserving', `from ${this.source.hostId}${to}`)
    await this.execution.change({
      decision: decisionKeys.started(this.id),
      kind: 'operation-started',
      message: `migration requested from ${this.source.hostId}${to}`,
      vmmId: this.source.id,
      set: { state: 'migrating' },
      operation: { request: this.request, status: 'running' },
      migration: {
        id: this.id,
        phase: 'reserving',
        source: { vmmId: this.source.id, hostId: this.source.hostId, requestedHostId: this.request.targetHostId ?? null }
      }
    })
  }

  private async reserve (): ReturnType<InstanceContext['placeVmm']> {
    return await this.execution.placeVmm(this.request, {
      migrationTarget: {
        migrationId: this.id,
        onlyHostId: this.request.targetHostId ?? null,
        excludeHostId: this.source.hostId
      }
    })
  }

  // --- steps 3 and 4 -------------------------------------------------------------------------

  /** Starts the target, sends once it is ready, and follows both sides until an ending. */
  private async transfer (): Promise<TransferEnding> {
    const target = this.target!
    this.execution.enterPhase('preparing', `target VMM ${target.vmmId} on ${target.hostId}`)
    let refused: string | null = null
    const ensure = CancellationScope.cancellable(async () => {
      const { id: instanceId, name: instanceName } = this.execution.instance
      this.execution.observe(await agents.ensureVmm({
        hostId: target.hostId,
        vmmId: target.vmmId,
        instanceId,
        instanceName,
        spec: vmmSpecOf(this.execution.instance),
        incoming: { migrationId: this.id }
      }))
    })
    ensure.catch((err: unknown) => { refused = describeFailure(err) })

    try {
      return await this.followBothSides(() => refused)
    } finally {
      this.sendCall?.cancel()
    }
  }

  private async followBothSides (refused: () => string | null): Promise<TransferEnding> {
    for (;;) {
      const ending = this.ending(refused())
      if (ending !== null) return ending
      if (!this.sendIssued && this.targetReady()) {
        await this.send()
        continue
      }
      this.noteProgress()
      const moved = await this.execution.waitFor(
        () => this.ending(refused()) !== null || (!this.sendIssued && this.targetReady()) || this.progressChanged(),
        this.msUntilGivingUp()
      )
      if (!moved && this.msUntilGivingUp() <= 0) {
        return { committed: false, failure: timeoutFailure(this.clock, Date.now(), this.execution.settings.migration, this.execution.instance.memoryMiB) }
      }
    }
  }

  private async send (): Promise<void> {
    const target = this.half(this.target!.vmmId)!
    const receiverUrl = target.receiverUrl!
    this.execution.enterPhase('sending', `to ${this.target!.hostId}`)
    await this.step('sending', 'sending', `target VMM ready on ${this.target!.hostId} at ${receiverUrl}; sending the VM`)
    const timeoutS = Math.ceil(completionTimeoutMs(this.execution.settings.migration, this.execution.instance.memoryMiB) / 1000)
    this.sendIssued = true
    const call = async (): Promise<void> => {
      try {
        this.execution.observe(await agents.sendMigration({
          hostId: this.source.hostId,
          vmmId: this.source.id,
          migrationId: this.id,
          destinationUrl: receiverUrl,
          downtimeMs: this.execution.settings.migration.downtimeMs,
          timeoutS
        }))
      } catch (err) {
        // Refused (the answer, not an outage: that is retried): the migration fails before its commit point.
        if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure)) throw err
        this.sendRefused = describeFailure(err)
      }
    }
    if (!this.onePlace) {
      await call()
      return
    }
    // The source's host may be away while the target goes on: the call must not hold up what
    // both sides report (a commit, a cancel, a timeout). It is cancelled at the ending.
    const scope = new CancellationScope()
    this.sendCall = scope
    scope.run(call).catch((err: unknown) => { if (!isCancellation(err)) this.sendRefused = describeFailure(err) })
  }

  /** What ends the transfer, from what both sides reported, or null while it goes on. */
  private ending (refused: string | null): TransferEnding | null {
    return transferEnding({
      migrationId: this.id,
      source: this.execution.vmm(this.source.id),
      target: this.execution.vmm(this.target!.vmmId),
      cancelRequestedBy: this.execution.cancelOf(this.id) ?? (this.cancelRecorded ? 'a request an earlier run of this migration took' : null),
      targetRefused: refused,
      sendRefused: this.sendRefused,
      sendIssued: this.sendIssued
    })
  }

  private targetReady (): boolean {
    return isTargetReady(this.half(this.target!.vmmId))
  }

  /** A VMM's half of this migration, as its agent last reported it. */
  private half (vmmId: string): VmmRecord['migration'] {
    return halfOf(this.execution.vmm(vmmId), this.id)
  }

  // --- timeouts --------------------------------------------------------------------------------

  private progress (): string {
    return progressMark(this.half(this.source.id), this.half(this.target!.vmmId))
  }

  private progressChanged (): boolean {
    return this.progress() !== this.progressMark
  }

  private noteProgress (): void {
    const mark = this.progress()
    if (mark === this.progressMark) return
    this.progressMark = mark
    this.clock.progressAt = Date.now()
    const iterations = this.half(this.source.id)?.iterations ?? 0
    if (this.sendIssued) this.execution.enterPhase('sending', `to ${this.target!.hostId}, ${iterations} memory iteration(s)`)
  }

  private msUntilGivingUp (): number {
    return msUntilGivingUp(this.clock, Date.now(), this.execution.settings.migration, this.execution.instance.memoryMiB)
  }

  // --- step 5 ----------------------------------------------------------------------------------

  /**
   * The target has the VM (or will have it: the source handed it over). Records the commit
   * first, then makes sure the source is gone, then the operation's success.
   */
  private async commit (): Promise<void> {
    const target = this.target!
    await this.awaitTargetFinished()
    if (!this.execution.isRunning(target.vmmId) || this.half(target.vmmId)?.phase !== 'finished') {
      await this.fail({ status: 'failed', code: 'MigrationLost', message: 'the source handed the VM over, and the target VMM ended before it ran it' })
      return
    }
    this.execution.enterPhase('committed', `the VM runs on ${target.hostId}`)
    await this.step('committed', 'committed', `committed: the VM runs on ${target.hostId}`, { set: { activeVmmId: target.vmmId }, vmmId: target.vmmId })
    await this.finishCommitted(this.execution.vmm(target.vmmId)!)
  }

  /** Past the commit point (recorded): the source goes, then the operation's success. */
  async finishCommitted (target: VmmRecord): Promise<void> {
    this.target = { vmmId: target.id, hostId: target.hostId }
    await this.confirmSourceGone()
    this.execution.enterPhase('running')
    await this.execution.change({
      decision: decisionKeys.finished(this.id),
      kind: 'operation-finished',
      message: `migrated from ${this.source.hostId} to ${target.hostId}`,
      vmmId: target.id,
      set: { state: 'running', lastError: null },
      operation: { request: this.request, status: 'succeeded' },
      migration: { id: this.id, phase: 'succeeded' }
    })
  }

  /**
   * A source that exited `migrated` got the target's acknowledgement before the target's agent
   * saw the receive finish: wait for that, asking the agent at each progress timeout. Never
   * cancelled: the target is the only one that has the VM.
   */
  private async awaitTargetFinished (): Promise<void> {
    const { vmmId, hostId } = this.target!
    const settled = (): boolean => this.half(vmmId)?.phase === 'finished' || this.execution.isGone(vmmId)
    while (!settled()) {
      if (await this.execution.waitFor(settled, this.execution.settings.migration.progressTimeoutMs)) break
      await describeOnHost(this.execution, { hostId, vmmId })
    }
  }

  /**
   * The target has the VM, so the source must not run it: it exits 0 by itself right after
   * `migration-finished`, and is killed otherwise, after the waits `nextSourceWait` gives it.
   */
  private async confirmSourceGone (): Promise<void> {
    const gone = (): boolean => this.execution.isGone(this.source.id)
    if (this.onePlace) {
      const phase = (): VmmMigration['phase'] | null => this.half(this.source.id)?.phase ?? null
      const had: Array<SourceWait['for']> = []
      for (let wait = nextSourceWait(phase(), had); wait !== null; wait = nextSourceWait(phase(), had)) {
        had.push(wait.for)
        await this.execution.waitFor(wait.for === 'exit' ? gone : () => gone() || phase() !== 'sending', wait.ms)
      }
    } else {
      await this.execution.waitFor(gone, SOURCE_EXIT_WAIT_MS)
    }
    if (gone()) return
    this.execution.enterPhase('committed', `the source VMM ${this.source.id} did not exit by itself; killing it`)
    await destroyOnHost(this.execution, this.execution.vmm(this.source.id) ?? this.source)
  }

  // --- step 6 ----------------------------------------------------------------------------------

  /** Cancels the target (which may turn out to have committed), then confirms the source runs. */
  private async abandon (failure: MigrationFailure): Promise<void> {
    this.execution.enterPhase('cancelling', failure.message)
    await this.step('cancelling', this.sendIssued ? 'sending' : 'preparing', `${failure.message}; cancelling the migration`, { cancelRequested: failure.code === 'MigrationCancelled' })
    if (await this.cancelTarget()) {
      await this.commit()
      return
    }
    await this.confirmSourceRunning()
    await this.fail(failure)
  }

  /** True if the target turned out to have finished receiving: the migration commits. */
  private async cancelTarget (): Promise<boolean> {
    const target = this.execution.vmm(this.target!.vmmId)
    if (target === null || this.execution.isGone(target.id)) return false
    const finished = (): boolean => this.half(target.id)?.phase === 'finished' && !this.execution.isGone(target.id)
    let refused = false
    const call = async (): Promise<void> => {
      try {
        this.execution.observe(await agents.cancelIncomingMigration({ hostId: target.hostId, vmmId: target.id, migrationId: this.id }))
      } catch (err) {
        // The agent answered that the VMM is not this migration's target (it never recorded it).
        if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure)) throw err
        refused = true
      }
    }
    if (this.onePlace) {
      // While the target's host is away, what the target reports by other means settles it too.
      let answered = false
      let failure: unknown = null
      const scope = new CancellationScope()
      scope.run(call).then(() => { answered = true }, (err: unknown) => { failure = err })
      const over = (): boolean => this.execution.isGone(target.id) || isFinalHalfPhase(this.half(target.id)?.phase ?? 'preparing')
      await this.execution.waitFor(() => answered || failure !== null || over())
      scope.cancel()
      if (failure !== null && !over()) throw failure
    } else {
      await call()
    }
    // A VMM the agent says is not this migration's target holds no VM: it is killed outright.
    if (refused) await destroyOnHost(this.execution, target)
    return !refused && finished()
  }

  /**
   * The source's send fails once its target is gone, and the VM resumes there; a source its
   * agent holds paused (the send failed past the downtime) is resumed now that the target is
   * known not to have the VM. Its agent is asked if it has not said so in time. A source found
   * gone fails the instance afterwards, as any end of its active VMM does (execution.ts `settle`).
   */
  private async confirmSourceRunning (): Promise<void> {
    // A send issued whose answer was never heard (the source's host away) may have started: only
    // the source's own word settles it.
    const unheard = (): boolean => this.onePlace && this.sendIssued && this.half(this.source.id) === null
    const settled = (): boolean => this.execution.isGone(this.source.id) || (!unheard() && this.half(this.source.id)?.phase !== 'sending')
    if (!await this.execution.waitFor(settled, SOURCE_SETTLE_WAIT_MS)) {
      await describeOnHost(this.execution, { hostId: this.source.hostId, vmmId: this.source.id })
    }
    if (this.half(this.source.id)?.phase === 'held' && !this.execution.isGone(this.source.id)) {
      this.execution.enterPhase('cancelling', `the target does not have the VM; resuming it on ${this.source.hostId}`)
      this.execution.observe(await agents.resumeHeldSource({ hostId: this.source.hostId, vmmId: this.source.id, migrationId: this.id }))
    }
  }

  private async fail (failure: MigrationFailure): Promise<void> {
    const running = this.execution.isRunning(this.source.id)
    this.execution.enterPhase(running ? 'running' : 'failed', failure.code)
    await this.execution.change({
      decision: decisionKeys.finished(this.id),
      kind: 'operation-finished',
      message: `migration ${failure.status === 'cancelled' ? 'cancelled' : 'failed'}: ${failure.message}${running ? `; the VM runs on ${this.source.hostId}` : ''}`,
      vmmId: this.source.id,
      ...(running ? { set: { state: 'running' as const } } : {}),
      operation: { request: this.request, status: 'failed', error: { code: failure.code, message: failure.message } },
      migration: { id: this.id, phase: failure.status, reason: failure.message }
    })
  }

  /** Records a step of the migration, with its event. */
  private async step (name: string, phase: MigrationRecordPhase, message: string, extra: Pick<ChangeInput, 'set' | 'vmmId'> & { cancelRequested?: boolean } = {}): Promise<void> {
    const { cancelRequested, ...change } = extra
    await this.execution.change({
      decision: decisionKeys.migrationStep(this.id, name),
      kind: 'migration-step',
      message,
      ...change,
      migration: { id: this.id, phase, ...(name === 'cancelling' ? { reason: message } : {}), ...(cancelRequested === true ? { cancelRequested } : {}) }
    })
  }
}
