/**
 * Theory of operation: one instance, one execution at a time.
 *
 * Every operation workflow of an instance runs under the workflow ID `instance-<id>`, so
 * Temporal runs at most one at a time: that is the instance lock (I4). Whatever its type, an
 * execution is an `InstanceExecution`, which
 *
 * 1. receives everything addressed to the instance: host reports (`vmmReport`, taken into the
 *    `VmmBook`), stops and deletes (`haltRequested`, kept in the `HaltBook`), a start or reboot
 *    handed over once no operation is in flight (`operationRequested`), and answers the `state`
 *    query;
 * 2. runs the operation it was started for in a cancellable scope. A stop or delete that arrives
 *    during a create, start or reboot cancels that scope: the preempted operation ends
 *    `superseded` and this execution runs the halt itself, so a stop never waits behind a stuck
 *    boot. Writes run in non-cancellable scopes and finish before the halt begins, so the halt
 *    starts from a consistent record (a placement's write may ask the agent to make its VMM, for
 *    5 s at most: start.ts step 3). Calls to host agents are cancellable: a call that
 *    completes after it was abandoned is harmless, because an agent never brings back a VMM ID
 *    it destroyed;
 * 3. when the operation is done, settles the instance against what its VMM reported meanwhile
 *    (a VMM that crashed right after booting still fails the instance), runs halts that arrived
 *    late, and completes only once every report it received is recorded (I5). A stop or delete
 *    that reached an execution which only took in reports, and a start or reboot handed over,
 *    continue as a new execution of their own workflow type;
 * 4. keeps going whatever befalls an operation: a failure the operation has no answer for ends
 *    that operation (`Interrupted`), never the execution (a migration is left for the reconciler
 *    to carry on from its record), and a halt whose history grows long (a wait of months on an
 *    unreachable host, a flood of requests) continues as new carrying every halt it holds.
 *
 * The write path (docs/design.md §8). Every write is a regular activity, scheduled by a workflow
 * task that has completed: the decision is in the history before its effect, so a workflow task
 * that is retried, for whatever reason and with whatever arrived meanwhile, has written nothing
 * its retry could contradict. Every write names its decision (domain/decisions.ts), so a retried
 * activity, a replay or a reset finds what the decision already did. The execution writes one
 * at a time, in the order it decided (`write`): each write starts from the record the previous
 * one left, and every answer is the record as it now is, which the execution takes as the truth.
 * Reports ride with the next write; the report pump records them on their own only when no
 * operation runs, and an operation waiting for its VMM (`waitFor`) records those that change
 * what people see.
 *
 * The operations see the execution only through `InstanceContext` (instance-context.ts), which
 * it implements: they read and write the instance through it, and import nothing of this file.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  CancellationScope,
  condition,
  isCancellation,
  log,
  makeContinueAsNewFunc,
  patched,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  uuid4,
  workflowInfo
} from '@temporalio/workflow'
import type { SearchAttributePair } from '@temporalio/common'
import type { HistoryLimits, OperationSettings } from '../contract/activities.js'
import {
  cancelMigrationSignal,
  declareHostLostSignal,
  forceStopSignal,
  haltRequestedSignal,
  operationRequestedSignal,
  stateQuery,
  vmmReportSignal
} from '../contract/messages.js'
import type { ChangeResult, InstanceChange, InstanceSnapshot } from '../contract/records.js'
import { HostIdKey, InstanceStateKey, OperationKey, ProjectKey } from '../contract/search-attributes.js'
import { WORKFLOW_TYPES } from '../contract/workflows.js'
import { decisionKeys } from '../domain/decisions.js'
import type { Instance } from '../domain/instance.js'
import { outcomeOfVmmEnd, planRestart } from '../domain/instance-rules.js'
import { HISTORY_LIMITS } from '../domain/limits.js'
import type { OperationKind } from '../domain/operation.js'
import type { HaltRequest, HandoffRequest, NewInstance, OperationRequest, StartRequest } from '../domain/requests.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { agents, reads, records } from './activity-proxies.js'
import { awaitRestart } from './auto-restart.js'
import { create } from './create.js'
import { halt } from './halt.js'
import { HaltBook } from './halts.js'
import type { ChangeInput, InstanceContext, Placement, PlacementOptions } from './instance-context.js'
import { recordHostFailureRestart, recordOperationOutcome } from './metrics.js'
import { migrate } from './migrate.js'
import { reboot } from './reboot.js'
import { describeFailure, start } from './start.js'
import { HALTS_CONTINUE_AS_NEW_PATCH, OPERATION_OUTLIVES_FAILURE_PATCH, PROJECT_IN_SEARCH_PATCH } from './patches.js'
import { VmmBook } from './vmm-book.js'

export class InstanceExecution implements InstanceContext {
  private snapshot: InstanceSnapshot | null = null
  private readonly vmms = new VmmBook()
  /** Stops and deletes received and not yet carried out; one halt serves them all. */
  readonly halts = new HaltBook()
  private bodyScope: CancellationScope | null = null
  private current: OperationRequest | null = null
  /** A start, reboot or migrate handed over to run next; later ones while it waits are refused. */
  private handoff: HandoffRequest | null = null
  private readonly refusedHandoffs: HandoffRequest[] = []
  /** Cancels of live migrations received, by migration ID: who asked. */
  private readonly migrationCancels = new Map<string, string>()
  /** A halt cut this execution's operation short, so this execution runs the halt itself. */
  private preempted = false
  /** An operation or a halt runs: it records the reports it needs to (`waitFor`), not the pump. */
  private operating = false
  /** The last write asked for; the next one starts when it has ended. */
  private lastWrite: Promise<unknown> = Promise.resolve()
  private writesInFlight = 0
  private operation: { kind: OperationKind | 'reports', operationId: string | null } = { kind: 'reports', operationId: null }
  private phase = 'loading'
  private loadedSettings: OperationSettings | null = null

  /** `first`: the request this execution was started for, or null when it only takes in reports. */
  constructor (readonly instanceId: string, private readonly first: OperationRequest | null) {
    setHandler(vmmReportSignal, (report) => { this.vmms.take(report) })
    setHandler(haltRequestedSignal, (request) => { this.receiveHalt(request) })
    setHandler(operationRequestedSignal, (request) => { this.receiveHandoff(request) })
    setHandler(cancelMigrationSignal, ({ migrationId, requestedBy }) => {
      if (!this.migrationCancels.has(migrationId)) this.migrationCancels.set(migrationId, requestedBy)
    })
    setHandler(forceStopSignal, (input) => {
      this.receiveHalt({
        kind: 'stop',
        operationId: uuid4(),
        instanceId,
        requestedAt: new Date().toISOString(),
        graceSeconds: 0,
        forcedBy: input?.reason ?? 'an operator'
      })
    })
    setHandler(declareHostLostSignal, async ({ hostId }) => {
      const lost = await CancellationScope.nonCancellable(() => agents.declareHostLost(hostId, instanceId))
      for (const vmm of lost) this.vmms.remember(vmm)
    })
    setHandler(stateQuery, () => ({
      instanceId: this.instanceId,
      operation: this.operation.kind,
      operationId: this.operation.operationId,
      state: this.snapshot?.instance.state ?? null,
      phase: this.phase,
      vmmId: this.snapshot?.instance.activeVmmId ?? null,
      hostId: this.activeVmm()?.hostId ?? null,
      stopDeadline: this.halts.deadline === null ? null : new Date(this.halts.deadline).toISOString(),
      pendingReports: this.vmms.unrecordedCount()
    }))
  }

  /**
   * Runs an execution from its first request (or none, when it only takes in reports) to the
   * end. `create`: the new instance, whose row is inserted if the API did not. `alsoHalts`:
   * stops and deletes handed over by an execution that continued as this one.
   */
  async run (create?: NewInstance, alsoHalts: HaltRequest[] = []): Promise<void> {
    for (const request of alsoHalts) this.receiveHalt(request)
    const opened = await reads.openExecution(this.instanceId, create)
    this.loadedSettings = opened.settings
    this.adopt(opened.snapshot)
    if (this.snapshot === null) return
    // The pump runs as long as the execution and never settles; were it to fail, the rejection
    // would fail the workflow task, which Temporal retries.
    // eslint-disable-next-line no-void
    void this.pumpReports()
    if (this.first !== null) await this.perform(this.first)
    await this.finish()
  }

  get settings (): OperationSettings {
    if (this.loadedSettings === null) throw new Error('the execution has not been opened')
    return this.loadedSettings
  }

  get instance (): Instance {
    if (this.snapshot === null) throw new Error('the instance has not been loaded')
    return this.snapshot.instance
  }

  activeVmm (): VmmRecord | null {
    const id = this.snapshot?.instance.activeVmmId
    return id == null ? null : this.vmms.get(id)
  }

  vmm (vmmId: string): VmmRecord | null {
    return this.vmms.get(vmmId)
  }

  /** The instance's VMMs that are not confirmed gone. */
  liveVmms (): VmmRecord[] {
    return this.vmms.live(this.instanceId)
  }

  isGone (vmmId: string): boolean {
    return this.vmms.isGone(vmmId)
  }

  isRunning (vmmId: string): boolean {
    return this.vmms.isRunning(vmmId)
  }

  /** Who asked to cancel the migration, if anyone has. */
  cancelOf (migrationId: string): string | null {
    return this.migrationCancels.get(migrationId) ?? null
  }

  /** Takes in a VMM's record read from PostgreSQL (one the snapshot leaves out, gone, say). */
  remember (vmm: VmmRecord): void {
    this.vmms.remember(vmm)
  }

  /** Takes in an agent's answer exactly like a report it sent. */
  observe (report: VmmReport | null): void {
    if (report !== null) this.vmms.take(report)
  }

  /** What the execution is doing, for the `state` query and the Temporal UI. */
  enterPhase (phase: string, detail?: string): void {
    this.phase = phase
    setCurrentDetails(detail === undefined ? phase : `${phase}: ${detail}`)
  }

  /** Records one change of the instance and its event (see the module comment). */
  async change (input: ChangeInput): Promise<void> {
    this.took(input, await this.write(() => records.recordInstanceChange(this.toChange(input))))
  }

  /** Takes in a change's result; an operation's outcome is counted once, where it was made. */
  private took ({ operation }: ChangeInput, result: ChangeResult): void {
    this.takeResult(result)
    if (operation !== undefined && operation.status !== 'running' && !result.madeBefore) {
      recordOperationOutcome(operation.request.kind, operation.status, operation.request.requestedAt)
    }
  }

  /**
   * Places the operation's new VMM (its ID named by the operation, a host, a reservation) and
   * makes it the active one, in one write; `before` is recorded in the same transaction. A live
   * migration's target is placed as the migration's, and does not become active.
   */
  async placeVmm (request: OperationRequest, { before, migrationTarget, boot, finish }: PlacementOptions = {}): Promise<Placement> {
    const { vcpus, memoryMiB } = this.instance
    const result = await this.write(() => {
      const first = before === undefined ? undefined : this.toChange(before)
      const change = this.toChange({
        decision: decisionKeys.placed(request.operationId),
        kind: 'vmm-placed',
        message: migrationTarget === undefined ? 'placed VMM' : 'placed the migration\'s target VMM',
        ...(migrationTarget === undefined ? {} : { migration: { id: migrationTarget.migrationId, phase: 'preparing' as const } })
      })
      // The finish carries no reports: those received meanwhile wait for a write that is sure to happen.
      const decided = boot === undefined || finish === undefined ? boot : { ...boot, finish: this.toChange(finish, []) }
      return records.placeVmm({ operationId: request.operationId, vcpus, memoryMiB, change, before: first, migrationTarget, boot: decided })
    })
    const finished = result.placed ? result.finished : undefined
    // The finish's record is the newer: taking the placement's first would show the instance
    // `starting` in search, then `running`, two upserts in one task.
    if (finished !== undefined && finish !== undefined) this.took(finish, finished)
    else this.adopt(result.snapshot)
    if (!result.placed) return { code: result.code, reason: result.reason }
    return { vmmId: result.vmmId, hostId: result.hostId, booted: result.booted ?? null, finished: finished !== undefined }
  }

  /**
   * Waits until `test` holds, at most `timeoutMs` (true if it held). Meanwhile, reports that
   * change what people see are recorded as they arrive; a report that makes `test` hold is left
   * for the write the operation makes next.
   */
  async waitFor (test: () => boolean, timeoutMs?: number): Promise<boolean> {
    if (timeoutMs !== undefined && timeoutMs <= 0) return test()
    // One timer for the whole wait, however often a report wakes it.
    let timedOut = false
    const timer = new CancellationScope()
    if (timeoutMs !== undefined) timer.run(() => sleep(timeoutMs)).then(() => { timedOut = true }, () => {})
    try {
      for (;;) {
        await condition(() => test() || timedOut || this.vmms.hasSignificantUnrecorded())
        if (test()) return true
        if (timedOut) return false
        await this.recordReports()
      }
    } finally {
      timer.cancel()
    }
  }

  /**
   * Runs a write after every write asked for before it, to the end whatever is cancelled
   * meanwhile (a write is never left half-known). `call` builds the write when its turn comes,
   * so it carries every report received until then.
   */
  private write<T> (call: () => Promise<T>): Promise<T> {
    this.writesInFlight++
    const turn = this.lastWrite.then(async () => await CancellationScope.nonCancellable(call)).finally(() => { this.writesInFlight-- })
    this.lastWrite = turn.catch(() => undefined)
    return turn
  }

  private toChange (input: ChangeInput, observations = this.vmms.takeUnrecorded()): InstanceChange {
    const info = workflowInfo()
    const { lastError, ...set } = input.set ?? {}
    return {
      instanceId: this.instanceId,
      decision: input.decision,
      kind: input.kind,
      message: input.message,
      details: input.details,
      vmmId: input.vmmId,
      set: {
        ...set,
        ...(lastError === undefined ? {} : { lastError: lastError === null ? null : { ...lastError, at: new Date().toISOString() } })
      },
      operation: input.operation === undefined
        ? undefined
        : {
            id: input.operation.request.operationId,
            kind: input.operation.request.kind,
            status: input.operation.status,
            error: input.operation.error ?? null,
            workflowId: info.workflowId,
            runId: info.runId
          },
      migration: input.migration,
      observations
    }
  }

  private takeResult (result: ChangeResult): void {
    for (const vmm of result.vmms) this.vmms.remember(vmm)
    this.adopt(result.snapshot)
    if (result.madeBefore) log.info('a decision was found recorded already; taking the record as it is', { state: result.snapshot.instance.state })
  }

  /** Takes the record PostgreSQL answered with as the truth. */
  private adopt (snapshot: InstanceSnapshot | null): void {
    if (snapshot === null) return
    this.snapshot = snapshot
    for (const vmm of [...snapshot.liveVmms, ...(snapshot.activeVmm === null ? [] : [snapshot.activeVmm])]) this.vmms.remember(vmm)
    const hostId = this.activeVmm()?.hostId
    // Records read before projects name none; patched only where one is named, as those replay.
    const projectId = snapshot.instance.projectId
    showInSearch([
      { key: InstanceStateKey, value: snapshot.instance.state },
      ...(hostId === undefined ? [] : [{ key: HostIdKey, value: hostId }]),
      ...(projectId === undefined || !patched(PROJECT_IN_SEARCH_PATCH) ? [] : [{ key: ProjectKey, value: projectId }])
    ])
  }

  /** Records the reports received and not yet recorded, if any are left when its turn comes. */
  private async recordReports (): Promise<void> {
    const vmms = await this.write(async () => {
      const reports = this.vmms.takeUnrecorded()
      return reports.length === 0 ? [] : await records.recordVmmObservations(this.instanceId, reports)
    })
    for (const vmm of vmms) this.vmms.remember(vmm)
  }

  private async pumpReports (): Promise<never> {
    for (;;) {
      await condition(() => this.vmms.hasUnrecorded() && !this.operating && this.writesInFlight === 0)
      await this.recordReports()
    }
  }

  /** Every report received is recorded, and no write is under way. */
  private recorded (): boolean {
    return !this.vmms.hasUnrecorded() && this.writesInFlight === 0
  }

  /** signalWithStart delivers a request to the execution it starts too: that one is `first`. */
  private receiveHandoff (request: HandoffRequest): void {
    const known = [this.first, this.handoff, ...this.refusedHandoffs].some((r) => r?.operationId === request.operationId)
    if (known) return
    if (this.handoff === null) this.handoff = request
    else this.refusedHandoffs.push(request)
  }

  private receiveHalt (request: HaltRequest): void {
    if (this.halts.receive(request) && this.current !== null) this.bodyScope?.cancel()
  }

  private async perform (request: OperationRequest): Promise<void> {
    if (request.kind === 'stop' || request.kind === 'delete') {
      this.receiveHalt(request)
      return
    }
    this.setOperation(request)
    if (this.halts.any) {
      await this.supersede(request)
      return
    }
    const scope = new CancellationScope()
    this.current = request
    this.bodyScope = scope
    this.operating = true
    try {
      await scope.run(() => this.runBody(request))
    } catch (err) {
      if (isCancellation(err) && this.halts.any) await this.supersede(request)
      else if (err instanceof ActivityFailure && patched(OPERATION_OUTLIVES_FAILURE_PATCH)) await this.interrupt(request, err)
      else throw err
    } finally {
      this.current = null
      this.bodyScope = null
      this.operating = false
    }
  }

  private async runBody (request: Exclude<OperationRequest, HaltRequest>): Promise<void> {
    switch (request.kind) {
      case 'create': return await create(this, request)
      case 'start': return await start(this, request)
      case 'reboot': return await reboot(this, request)
      case 'migrate': return await migrate(this, request)
    }
  }

  /**
   * An activity's failure escaped the operation (a refusal it had no answer for): the operation
   * ends, never the execution, which goes on to settle the instance and take in what arrives. A
   * migration's outcome is decided by both its sides, so one that cannot go on is left running,
   * for the reconciler to carry on from its record (activities/reconciler.ts): recording it failed
   * while its target may commit would be a lie.
   */
  private async interrupt (request: Exclude<OperationRequest, HaltRequest>, err: ActivityFailure): Promise<void> {
    const message = `${request.kind} interrupted by a failure it has no answer for: ${describeFailure(err)}`
    log.error(message, { operationId: request.operationId })
    this.enterPhase('interrupted', message)
    if (request.kind === 'migrate') return
    await this.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message,
      operation: { request, status: 'failed', error: { code: 'Interrupted', message } }
    })
  }

  private async supersede (request: OperationRequest): Promise<void> {
    this.preempted = true
    const by = this.halts.pending[0]
    const message = `${request.kind} superseded by ${by.kind} ${by.operationId}`
    await this.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message,
      operation: { request, status: 'superseded', error: { code: 'Superseded', message } },
      // Its VMMs are the halt's to stop now: the target too, which is a live VMM of the instance.
      ...(request.kind === 'migrate' ? { migration: { id: request.operationId, phase: 'aborted' as const, reason: message } } : {})
    })
  }

  /**
   * Runs what arrived after the operation, then ends the execution. A stop or delete that
   * preempted this execution's operation runs here; one that arrived once the operation was over
   * (or while only reports were taken in) waits until the reports are recorded, then continues
   * as a new execution of its own type, so every operation shows in Temporal as an execution of
   * its own. A stop or delete supersedes a start or reboot handed over.
   *
   * The execution ends in the workflow task in which it finds nothing left to do. Should
   * anything arrive during that task, the server refuses to end the execution and the task runs
   * again with it; no write was made in the refused task, so nothing of its is lost.
   */
  private async finish (): Promise<void> {
    let restart: StartRequest | null
    for (;;) {
      restart = await this.runWhatArrived()
      await condition(allHandlersFinished)
      await this.recordRefusedHandoffs()
      if (this.recorded()) break
    }
    const [halt, ...others] = this.halts.takeAll()
    if (halt !== undefined) await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES[halt.kind] })(halt, ...others)
    if (this.handoff !== null) await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES[this.handoff.kind] })(this.handoff)
    if (restart !== null) await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES.start })(restart)
  }

  /** Records each start, reboot or migrate refused because another was already waiting to run. */
  private async recordRefusedHandoffs (): Promise<void> {
    for (const request of this.refusedHandoffs.splice(0)) {
      const message = `${request.kind} refused: another request was already waiting to run`
      await this.change({
        decision: decisionKeys.finished(request.operationId),
        kind: 'operation-finished',
        message,
        operation: { request, status: 'failed', error: { code: 'Conflict', message } }
      })
    }
  }

  /**
   * Runs what arrived after the operation: a halt this execution runs itself, reports to settle,
   * a failed instance's restart to wait for. Returns the restart to continue as, if one is due.
   */
  private async runWhatArrived (): Promise<StartRequest | null> {
    const runsHalts = (): boolean => this.halts.any && (this.preempted || this.first?.kind === 'stop' || this.first?.kind === 'delete')
    for (;;) {
      await condition(() => this.recorded() || runsHalts())
      if (this.halts.any && this.handoff !== null) {
        await this.supersede(this.handoff)
        this.handoff = null
      }
      if (runsHalts()) {
        this.setOperation({ kind: this.halts.kind(), operationId: this.halts.pending[0].operationId })
        this.operating = true
        await this.runHalt().finally(() => { this.operating = false })
        continue
      }
      await this.settle()
      if (!this.recorded()) continue
      if (this.halts.any || this.handoff !== null || this.instance.state !== 'failed') return null
      // A failed instance waiting to restart by itself (auto-restart.ts).
      const restart = await awaitRestart(this.instance, () => !this.recorded() || this.halts.any || this.handoff !== null)
      if (restart !== null || this.instance.restartAt === null) return restart
    }
  }

  /**
   * Runs the halt. A halt may wait long on a host that does not answer (I2), and take in a flood of
   * stops, deletes and reports meanwhile; once the history is long (`historyIsLong`) it continues
   * as a new execution carrying every halt it holds. A halt runs again from its start as it would
   * after a reset: each of its writes finds its decision recorded, and its calls to agents are the
   * same (the same deadline, the same kill).
   */
  private async runHalt (): Promise<void> {
    if (!patched(HALTS_CONTINUE_AS_NEW_PATCH)) {
      await halt(this)
      return
    }
    const scope = new CancellationScope()
    let tooLong = false
    const watch = new CancellationScope()
    const limits = this.settings.history ?? HISTORY_LIMITS
    // What the run adds while the halt waits counts, not what it took to begin it (a run that
    // carries many halts records each one's start again).
    let waitingSince: number | null = null
    watch.run(() => condition(() => waitingSince !== null && historyIsLong(limits, waitingSince))).then(() => { tooLong = true; scope.cancel() }, () => {})
    try {
      await scope.run(() => halt(this, () => { waitingSince = workflowInfo().historyLength }))
    } catch (err) {
      if (!(tooLong && isCancellation(err))) throw err
      await this.continueHaltsAsNew()
    } finally {
      watch.cancel()
    }
  }

  /** Records what is owed (refused hand-overs, reports), then continues as new with every halt held. */
  private async continueHaltsAsNew (): Promise<never> {
    await this.recordRefusedHandoffs()
    await condition(() => this.writesInFlight === 0)
    await this.recordReports()
    const [first, ...others] = this.halts.takeAll()
    log.info('the history is long: continuing as new with the halts held', { halts: others.length + 1 })
    return await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES[first!.kind] })(first, ...others)
  }

  /**
   * Brings the instance in line with what its active VMM reported when no operation was there to
   * take it in: a VMM that ended makes the instance stopped or failed (only positive signals get
   * here, I2); a VMM found running makes a starting or rebooting instance running.
   */
  private async settle (): Promise<void> {
    const vmm = this.activeVmm()
    const state = this.instance.state
    if (vmm === null || state === 'destroyed' || state === 'stopped' || state === 'failed') return
    // A migration left unfinished is carried on from its record, which decides where the VM runs:
    // its source may be held paused, and reads `running` all the same.
    if (state === 'migrating' && !isTerminalVmmState(vmm.state) && patched(OPERATION_OUTLIVES_FAILURE_PATCH)) return
    if (isTerminalVmmState(vmm.state)) {
      const outcome = outcomeOfVmmEnd(vmm)
      const restart = planRestart(this.instance, vmm, outcome, this.settings, Date.now())
      if (restart?.policy === 'on host failure: restart') recordHostFailureRestart()
      await this.change({
        decision: decisionKeys.vmmEnded(vmm.id),
        kind: 'state-changed',
        message: restart === null
          ? outcome.message
          : `${outcome.message}; restarting in ${Math.round((restart.at - Date.now()) / 1000)} s (${restart.policy}, attempt ${restart.attempts})`,
        vmmId: vmm.id,
        details: { exit: vmm.exit, reason: vmm.reason },
        set: {
          state: outcome.state,
          intendedState: outcome.intendedState,
          lastError: outcome.error,
          ...(restart === null ? {} : { restartAt: new Date(restart.at).toISOString(), restartAttempts: restart.attempts })
        }
      })
    } else if (vmm.state === 'running' && state !== 'running') {
      await this.change({
        decision: decisionKeys.vmmRunning(vmm.id, vmm.generation),
        kind: 'state-changed',
        message: 'VMM reported running',
        vmmId: vmm.id,
        set: { state: 'running' }
      })
    }
  }

  /** The operation this execution is running (or ran last), for the `state` query and the UI. */
  private setOperation (operation: { kind: OperationKind, operationId: string }): void {
    this.operation = operation
    showInSearch([{ key: OperationKey, value: operation.kind }])
  }
}

/** Whether a run is to continue as new: its history is long, and it grew by enough since `began`. */
function historyIsLong (limits: HistoryLimits, began: number): boolean {
  const { continueAsNewSuggested, historyLength } = workflowInfo()
  return (continueAsNewSuggested || historyLength >= limits.continueAsNewAfterEvents) && historyLength - began >= limits.minGrowthEvents
}

/**
 * Sets the search attributes that differ from what the execution already shows, in one upsert:
 * each upsert is an event in the history.
 */
function showInSearch (pairs: SearchAttributePair[]): void {
  const current = workflowInfo().typedSearchAttributes
  const updates = pairs.filter(({ key, value }) => current.get(key) !== value)
  if (updates.length > 0) upsertSearchAttributes(updates)
}
