/**
 * Theory of operation: one instance, one execution at a time.
 *
 * Every operation workflow of an instance runs under the workflow ID `instance-<id>`, so
 * Temporal runs at most one at a time: that is the instance lock (I4). Whatever its type, an
 * execution is an `InstanceExecution`, which
 *
 * 1. receives everything addressed to the instance: host reports (`vmmReport`), stops and
 *    deletes (`haltRequested`), a start or reboot handed over once no operation is in flight
 *    (`operationRequested`), and answers the `state` query;
 * 2. applies every report to its VMM's record as it arrives (the report pump); stale generations
 *    are ignored by the record itself, and the latest known state of each VMM is kept here for
 *    operations to wait on;
 * 3. runs the operation it was started for in a cancellable scope. A stop or delete that arrives
 *    during a create, start or reboot cancels that scope: the preempted operation ends
 *    `superseded` and this execution runs the halt itself, so a stop never waits behind a stuck
 *    boot. Writes to PostgreSQL run in non-cancellable scopes and finish before the halt begins,
 *    so the halt starts from a consistent record. Calls to host agents are cancellable: a call
 *    that completes after it was abandoned is harmless, because an agent never brings back a
 *    VMM ID it destroyed;
 * 4. when the operation is done, settles the instance against what its VMM reported meanwhile
 *    (a VMM that crashed right after booting still fails the instance), runs halts that arrived
 *    late, and completes only once every report it received is applied (I5). A stop or delete
 *    that reached an execution which only applied reports, and a start or reboot handed over,
 *    continue as a new execution of their own workflow type.
 *
 * Every write to the instance goes through `change`: one event, one generation, chosen here.
 *
 * The report pump and the operation run side by side, and both write through local activities.
 * An execution runs its local activities one at a time (`local`), in the order they were asked
 * for. Two in flight at once finish in whatever order PostgreSQL answers, and the worker hands
 * each result to the workflow as it comes; a replay hands them over together, in the order they
 * were scheduled. Whichever side wakes first takes the next command's sequence number, so a
 * replay could give a pump's write the number an operation's call had: a nondeterminism error,
 * and an instance stuck until an operator reset it (found by the crash campaign: 12 of 300
 * stops; the SDKs' own issue, temporalio/sdk-python#1578). One at a time, each result reaches
 * the workflow alone, in a replay as the first time.
 */
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  isCancellation,
  makeContinueAsNewFunc,
  patched,
  setHandler,
  sleep,
  upsertSearchAttributes,
  uuid4,
  workflowInfo
} from '@temporalio/workflow'
import type { ChangeEvent, InstanceChange, InstanceFields, InstanceSnapshot } from '../activities/instance-records.js'
import type { OperationSettings } from '../activities/index.js'
import type { Instance, InstanceError } from '../domain/instance.js'
import { outcomeOfVmmEnd, planRestart } from '../domain/instance-rules.js'
import type { OperationError, OperationKind, OperationStatus } from '../domain/operation.js'
import { isTerminalVmmState, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { agents, records, settings, taskBoundary } from './activities.js'
import {
  PATCHES,
  WORKFLOW_TYPES,
  declareHostLostSignal,
  forceStopSignal,
  haltRequestedSignal,
  operationRequestedSignal,
  stateQuery,
  vmmReportSignal,
  type HaltRequest,
  type OperationRequest,
  type RebootRequest,
  type StartRequest
} from './definitions.js'
import { awaitRestart } from './auto-restart.js'
import { recordOperationOutcome } from './metrics.js'
import { HostIdKey, InstanceStateKey, OperationKey } from './search-attributes.js'

export type OperationBody<R extends OperationRequest = OperationRequest> = (x: InstanceExecution, request: R) => Promise<void>
export type HaltRoutine = (x: InstanceExecution) => Promise<void>

export interface OperationBodies {
  create: OperationBody
  start: OperationBody
  reboot: OperationBody
  halt: HaltRoutine
}

/** A change as operations describe it; `change` adds the event ID, generation and times. */
export interface ChangeInput extends ChangeEvent {
  set?: Omit<InstanceFields, 'lastError'> & { lastError?: Omit<InstanceError, 'at'> | null }
  operation?: { request: OperationRequest, status: OperationStatus, error?: OperationError | null }
}

export class InstanceExecution {
  private snapshot: InstanceSnapshot | null = null
  private readonly vmms = new Map<string, VmmRecord>()
  private readonly reports: VmmReport[] = []
  private applying = false
  private bodyScope: CancellationScope | null = null
  private current: OperationRequest | null = null
  /** A start or reboot handed over to run next; later ones while it waits are refused. */
  private handoff: StartRequest | RebootRequest | null = null
  private readonly refusedHandoffs: Array<StartRequest | RebootRequest> = []
  /** A halt cut this execution's operation short, so this execution runs the halt itself. */
  private preempted = false
  private searchableHostId: string | null = null
  private operation: { kind: OperationKind | 'reports', operationId: string | null } = { kind: 'reports', operationId: null }
  /** Stops and deletes received and not yet carried out; one halt serves them all. */
  readonly halts: HaltRequest[] = []
  /** The earliest deadline of the halts received, in ms since the epoch. */
  haltDeadline: number | null = null
  /** What the execution is doing, for the `state` query: loading, placing, booting, stopping, … */
  phase = 'loading'
  /** Signals received so far, of every kind (`counted`). */
  private received = 0
  /** Local activities run one at a time (see the module comment); false in older histories. */
  private serialLocalActivities = false
  /** Settles when the last local activity asked for has ended. */
  private localActivitiesDone: Promise<unknown> = Promise.resolve()
  settings!: OperationSettings

  /** `first`: the request this execution was started for, or null when it only applies reports. */
  constructor (readonly instanceId: string, private readonly bodies: OperationBodies, private readonly first: OperationRequest | null) {
    setHandler(vmmReportSignal, this.counted((report) => { this.reports.push(report) }))
    setHandler(haltRequestedSignal, this.counted((request) => { this.receiveHalt(request) }))
    setHandler(operationRequestedSignal, this.counted((request) => { this.receiveHandoff(request) }))
    setHandler(forceStopSignal, this.counted((input) => {
      this.receiveHalt({
        kind: 'stop',
        operationId: uuid4(),
        instanceId,
        requestedAt: new Date().toISOString(),
        graceSeconds: 0,
        forcedBy: input?.reason ?? 'an operator'
      })
    }))
    setHandler(declareHostLostSignal, this.counted(async ({ hostId }) => {
      const lost = await CancellationScope.nonCancellable(() => agents.declareHostLost(hostId, instanceId))
      for (const vmm of lost) this.remember(vmm)
    }))
    setHandler(stateQuery, () => ({
      instanceId: this.instanceId,
      operation: this.operation.kind,
      operationId: this.operation.operationId,
      state: this.snapshot?.instance.state ?? null,
      phase: this.phase,
      vmmId: this.snapshot?.instance.activeVmmId ?? null,
      hostId: this.activeVmm()?.hostId ?? null,
      stopDeadline: this.haltDeadline === null ? null : new Date(this.haltDeadline).toISOString(),
      pendingReports: this.reports.length
    }))
  }

  /**
   * Runs an execution from its first request (or none, when it only applies reports) to the end.
   * `alsoHalts` are stops and deletes handed over by an execution that continued as this one.
   */
  async run (load: () => Promise<InstanceSnapshot | null>, alsoHalts: HaltRequest[] = []): Promise<void> {
    this.serialLocalActivities = patched(PATCHES.serialLocalActivities)
    for (const halt of alsoHalts) this.receiveHalt(halt)
    this.settings = await settings.operationSettings()
    this.useSnapshot(await this.local(load))
    if (this.snapshot === null) return
    // The snapshot is recorded in the history before the first write. Local activities are
    // recorded only when their workflow task completes: a worker that died after a write but
    // before that would otherwise retry the task with a fresh load showing its own write, take
    // another path (a reboot finding the instance already `rebooting`), and lose that path's
    // writes to the event IDs the first attempt used (found by the fault matrix). An eager no-op
    // activity ends the task here (executions that began before it took a 1 ms timer, which
    // Temporal fires up to a second late).
    if (patched(PATCHES.snapshotBoundaryByActivity)) await taskBoundary.endWorkflowTask()
    else if (patched(PATCHES.snapshotBeforeWrites)) await sleep(1)
    // The pump runs as long as the execution and never settles; were it to fail, the rejection
    // would fail the workflow task, which Temporal retries.
    // eslint-disable-next-line no-void
    void this.pumpReports()
    if (this.first !== null) await this.perform(this.first)
    await this.finish()
  }

  /** A signal handler that also counts the signal, so `finish` can tell whether any arrived. */
  private counted<A extends unknown[], R> (handler: (...args: A) => R): (...args: A) => R {
    return (...args) => {
      this.received++
      return handler(...args)
    }
  }

  get instance (): Instance {
    if (this.snapshot === null) throw new Error('the instance has not been loaded')
    return this.snapshot.instance
  }

  activeVmm (): VmmRecord | null {
    const id = this.snapshot?.instance.activeVmmId
    return id == null ? null : this.vmms.get(id) ?? null
  }

  vmm (vmmId: string): VmmRecord | null {
    return this.vmms.get(vmmId) ?? null
  }

  /** The instance's VMMs that are not confirmed gone. */
  liveVmms (): VmmRecord[] {
    return [...this.vmms.values()].filter((v) => v.instanceId === this.instanceId && !isTerminalVmmState(v.state))
  }

  haltKind (): 'stop' | 'delete' {
    return this.halts.some((h) => h.kind === 'delete') ? 'delete' : 'stop'
  }

  /** Records one change of the instance and its event; see the module comment. */
  async change (input: ChangeInput): Promise<void> {
    const change = this.toChange(input)
    this.useSnapshot(await this.local(() => records.recordInstanceChange(change)))
    const { operation } = input
    if (operation !== undefined && operation.status !== 'running') {
      recordOperationOutcome(operation.request.kind, operation.status, operation.request.requestedAt)
    }
  }

  /**
   * Places a new VMM (chosen ID, host, reservation) and makes it the active one, in one write.
   * Returns the host, or the reason no host could take it.
   */
  async place (vmmId: string, input: ChangeInput): Promise<{ hostId: string } | { reason: string }> {
    const { vcpus, memoryMiB } = this.instance
    const change = this.toChange({ ...input, set: { ...input.set, activeVmmId: vmmId } })
    const result = await this.local(() => records.placeVmm({ vmmId, vcpus, memoryMiB, change }))
    if (!result.placed) return { reason: result.reason }
    this.useSnapshot(result.snapshot)
    return { hostId: result.hostId }
  }

  /**
   * Runs a local activity to the end whatever is cancelled meanwhile (a write is never left
   * half-known), after every one asked for before it (see the module comment). Not async: an
   * older history replays with exactly the promise steps it was recorded with.
   */
  private local<T> (call: () => Promise<T>): Promise<T> {
    if (!this.serialLocalActivities) return CancellationScope.nonCancellable(call)
    const result = this.localActivitiesDone.then(async () => await CancellationScope.nonCancellable(call))
    this.localActivitiesDone = result.then(() => undefined, () => undefined)
    return result
  }

  private toChange (input: ChangeInput): InstanceChange {
    const info = workflowInfo()
    const { lastError, ...set } = input.set ?? {}
    return {
      instanceId: this.instanceId,
      eventId: uuid4(),
      expectedGeneration: this.instance.generation,
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
          }
    }
  }

  /** Adopts a snapshot returned by a write that went through elsewhere (placement). */
  useSnapshot (snapshot: InstanceSnapshot | null): void {
    if (snapshot === null) return
    const previous = this.snapshot?.instance.state
    this.snapshot = snapshot
    for (const vmm of [...snapshot.liveVmms, ...(snapshot.activeVmm === null ? [] : [snapshot.activeVmm])]) this.remember(vmm)
    if (snapshot.instance.state !== previous) upsertSearchAttributes([{ key: InstanceStateKey, value: snapshot.instance.state }])
    const hostId = this.activeVmm()?.hostId ?? null
    if (hostId !== null && hostId !== this.searchableHostId) {
      this.searchableHostId = hostId
      upsertSearchAttributes([{ key: HostIdKey, value: hostId }])
    }
  }

  /** Applies an agent's answer exactly like a report, and waits until it is recorded. */
  async observe (report: VmmReport | null): Promise<void> {
    if (report === null) return
    const before = this.vmms.get(report.vmmId)?.unresponsiveSince ?? null
    const result = await this.local(() => records.applyVmmObservation(report))
    if (result.vmm === null) return
    this.remember(result.vmm)
    if (result.applied) await this.noteUnresponsiveness(before, result.vmm)
  }

  /** Tells the instance's events when its VMM's API stops or starts answering again. */
  private async noteUnresponsiveness (before: string | null, vmm: VmmRecord): Promise<void> {
    const after = vmm.unresponsiveSince
    if ((before === null) === (after === null) || vmm.id !== this.snapshot?.instance.activeVmmId || isTerminalVmmState(vmm.state)) return
    const message = after !== null
      ? `VMM API unresponsive since ${after}; its process lives, and the state is unchanged`
      : 'VMM API answers again'
    const eventId = uuid4()
    await this.local(() => records.appendEvent({ eventId, instanceId: this.instanceId, kind: 'condition-changed', vmmId: vmm.id, message }))
  }

  /** Takes in a VMM record newer than (or as new as) the one known. */
  remember (vmm: VmmRecord): void {
    const known = this.vmms.get(vmm.id)
    if (known === undefined || vmm.generation >= known.generation) this.vmms.set(vmm.id, vmm)
  }

  private async pumpReports (): Promise<never> {
    for (;;) {
      await condition(() => this.reports.length > 0)
      this.applying = true
      try {
        await this.observe(this.reports.shift() ?? null)
      } finally {
        this.applying = false
      }
    }
  }

  private reportsApplied (): boolean {
    return this.reports.length === 0 && !this.applying
  }

  /**
   * Waits for `test` at most `timeoutMs`; at the timeout, the reports already received are
   * applied before `test` is asked again. A report that arrived before a deadline can reach the
   * workflow in the same task as the deadline's timer (a task retried late, a busy worker): the
   * verdict must be on it too (found by the crash campaign: a VM reported running 37 s before its
   * boot deadline was killed as a boot timeout).
   */
  async conditionWithReports (test: () => boolean, timeoutMs: number): Promise<boolean> {
    if (await condition(test, timeoutMs)) return true
    if (!patched(PATCHES.reportsBeforeVerdict)) return false
    await condition(() => this.reportsApplied())
    return test()
  }

  /** signalWithStart delivers a request to the execution it starts too: that one is `first`. */
  private receiveHandoff (request: StartRequest | RebootRequest): void {
    const known = [this.first, this.handoff, ...this.refusedHandoffs].some((r) => r?.operationId === request.operationId)
    if (known) return
    if (this.handoff === null) this.handoff = request
    else this.refusedHandoffs.push(request)
  }

  private receiveHalt (request: HaltRequest): void {
    if (this.halts.some((h) => h.operationId === request.operationId)) return
    this.halts.push(request)
    const deadline = Date.parse(request.requestedAt) + request.graceSeconds * 1000
    this.haltDeadline = this.haltDeadline === null ? deadline : Math.min(this.haltDeadline, deadline)
    if (this.current !== null) this.bodyScope?.cancel()
  }

  private async perform (request: OperationRequest): Promise<void> {
    if (request.kind === 'stop' || request.kind === 'delete') {
      this.receiveHalt(request)
      return
    }
    this.setOperation(request)
    if (this.halts.length > 0) {
      await this.supersede(request)
      return
    }
    const body = this.bodies[request.kind]
    const scope = new CancellationScope()
    this.current = request
    this.bodyScope = scope
    try {
      await scope.run(() => body(this, request))
    } catch (err) {
      if (!isCancellation(err) || this.halts.length === 0) throw err
      await this.supersede(request)
    } finally {
      this.current = null
      this.bodyScope = null
    }
  }

  private async supersede (request: OperationRequest): Promise<void> {
    this.preempted = true
    const by = this.halts[0]
    const message = `${request.kind} superseded by ${by.kind} ${by.operationId}`
    await this.change({
      kind: 'operation-finished',
      message,
      operation: { request, status: 'superseded', error: { code: 'Superseded', message } }
    })
  }

  /**
   * Runs what arrived after the operation, then ends the execution. A stop or delete that
   * preempted this execution's operation runs here; one that arrived once the operation was over
   * (or while only reports were applied) waits until the reports are applied, then continues as a
   * new execution of its own type, so every operation shows in Temporal as an execution of its
   * own. A stop or delete supersedes a start or reboot handed over.
   */
  private async finish (): Promise<void> {
    let restart: StartRequest | null
    for (;;) {
      restart = await this.runWhatArrived()
      await condition(allHandlersFinished)
      for (const request of this.refusedHandoffs.splice(0)) {
        const message = `${request.kind} refused: another request was already waiting to run`
        await this.change({ kind: 'operation-finished', message, operation: { request, status: 'failed', error: { code: 'Conflict', message } } })
      }
      // The execution ends in a workflow task that wrote nothing. The server refuses to end an
      // execution in a task during which a signal arrived; the task is retried with the signal,
      // and may then take another path (a delete sent as a stop ends runs as a delete). Had that
      // task written, its retry would write through the same event IDs and those writes would be
      // dropped as repeats: a delete recorded `succeeded` with the instance `stopped` (found by
      // the performance benchmark; test/faults/signal-at-execution-end.test.ts). An activity ends
      // the task here; whatever arrived meanwhile is run before the execution ends.
      if (!patched(PATCHES.closeInTaskWithoutWrites)) break
      const received = this.received
      await taskBoundary.endWorkflowTask()
      if (this.received === received && this.reportsApplied()) break
    }
    const [halt, ...others] = this.halts
    if (halt !== undefined) await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES[halt.kind] })(halt, ...others)
    if (this.handoff !== null) await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES[this.handoff.kind] })(this.handoff)
    if (restart !== null) await makeContinueAsNewFunc({ workflowType: WORKFLOW_TYPES.start })(restart)
  }

  /**
   * Runs what arrived after the operation: a halt this execution runs itself, reports to settle,
   * a failed instance's restart to wait for. Returns the restart to continue as, if one is due.
   */
  private async runWhatArrived (): Promise<StartRequest | null> {
    const runsHalts = (): boolean => this.halts.length > 0 && (this.preempted || this.first?.kind === 'stop' || this.first?.kind === 'delete')
    for (;;) {
      await condition(() => this.reportsApplied() || runsHalts())
      if (this.halts.length > 0 && this.handoff !== null) {
        await this.supersede(this.handoff)
        this.handoff = null
      }
      if (runsHalts()) {
        this.setOperation({ kind: this.haltKind(), operationId: this.halts[0].operationId })
        await this.bodies.halt(this)
        continue
      }
      await this.settle()
      if (!this.reportsApplied()) continue
      if (this.halts.length > 0 || this.handoff !== null || this.instance.state !== 'failed') return null
      // A failed instance waiting to restart by itself (auto-restart.ts).
      const restart = await awaitRestart(this.instance, () => !this.reportsApplied() || this.halts.length > 0 || this.handoff !== null)
      if (restart !== null || this.instance.restartAt === null) return restart
    }
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
    if (isTerminalVmmState(vmm.state)) {
      const outcome = outcomeOfVmmEnd(vmm)
      const restart = planRestart(this.instance, vmm, outcome, this.settings, Date.now())
      await this.change({
        kind: 'state-changed',
        message: restart === null
          ? outcome.message
          : `${outcome.message}; restarting in ${Math.round((restart.at - Date.now()) / 1000)} s (restart policy on-failure, attempt ${restart.attempts})`,
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
      await this.change({ kind: 'state-changed', message: 'VMM reported running', vmmId: vmm.id, set: { state: 'running' } })
    }
  }

  /** The operation this execution is running (or ran last), for the `state` query and the UI. */
  private setOperation (operation: { kind: OperationKind, operationId: string }): void {
    this.operation = operation
    upsertSearchAttributes([{ key: OperationKey, value: operation.kind }])
  }
}
