/**
 * A VMM's half of a live migration (domain/vmm.ts `VmmMigration`): the target that receives the
 * VM, or the source that sends it.
 *
 * Theory of operation
 *
 * Each half is recorded before it acts (I3) and then followed through the VMM's events, which say
 * how far Cloud Hypervisor got (cloud-hypervisor-notes §6, §9). A phase only moves forward and a
 * final one (`finished`, `failed`) never changes, so an event applied twice, late, or both as an
 * event and as an API answer changes nothing the second time. Every move is reported.
 *
 * Target. Its ensure records the half (`preparing`, with the receiver URL: migration-transport.ts)
 * before the empty VMM is spawned; its disks and seed must already be in the shared storage, and
 * only its TAPs are made (vmm-devices.ts). Once the API answers, `vm.receive-migration` is issued
 * as a long call: it holds the VMM until the migration ends, so pings and presses skip it, as
 * during a boot. `migration-receive-ready` is `ready` (the source may send), `-started` is
 * `receiving`, and `-finished`, or the call's 204, is `finished`: the commit point, the VM runs
 * here now, the VMM is `running` and its console is relayed. A 500 or `-failed` is `failed`, and
 * the VMM is killed (`pendingKill` recorded first), since a target is single-use: after a refused
 * command Cloud Hypervisor has cleared its VM, while a sender that went away shows only as a 500
 * without an event and may leave a half-built VM holding the disks' locks. It ends `failed`,
 * cause `boot-failed`: its VM never ran here.
 *
 * Source. The send is recorded (`sending`, its parameters, and the event file's size: where its
 * events begin) before `vm.send-migration` is issued; that Cloud Hypervisor took it is recorded on
 * the 204, or when `migration-started` shows it. A send recorded but not seen taken (an agent that
 * died between the record and the call, a call that got no answer) is issued again by the restart
 * or the retry, unless its events show it started. `migration-started` and each
 * `migration-memory-iteration` move `progressAt` (and the iterations); `migration-finished` is
 * `finished`, after which the process exits 0: `destroyed`, cause `migrated`
 * (exit-classification.ts). A 500 to the send is `failed`: the VM runs on here.
 *
 * The guest runs in one place (docs/design.md §15). Once precopy converges Cloud Hypervisor
 * pauses the VM (`vm paused`: the downtime begins, recorded as `downtimeBegan`), releases its
 * disks' locks, and sends the final state and Complete; the target resumes the VM on Complete and
 * acknowledges it. On any failure, the worker emits `migration-failed` and the VMM resumes the VM
 * by itself (`check_migration`). Before the downtime that is right: the target never had the VM,
 * and the half is `failed`, the VM running on here. Past it, the target may have the VM (the
 * acknowledgement of Complete was lost: both would run it, on the same disks, the source without
 * its locks, CH #7111), and the source cannot tell; so the agent pauses the VM at once
 * (`vm.pause`, answered "currently migrating" until Cloud Hypervisor has given the VM back to its
 * VMM, and tried again) and only then records the half `held`. Whoever has the VM is decided by
 * the control plane, which sees the target's half: the target wins when it finished, and the
 * source is killed; otherwise the source is resumed (`resumeHeld`: `failed`, the VM running on
 * here). The agent needs nobody for the pause, so it holds when its host is cut off from the
 * control plane too: the VM stays paused here until the control plane is heard again. A
 * restarted agent re-reads the send's events, so it pauses a VM that Cloud Hypervisor resumed
 * after such a failure while no agent watched. The guest runs twice only for the agent's reaction
 * (the event, then a call on the VMM's socket), or while the source's agent is down.
 *
 * Cancel (of a target). Cloud Hypervisor has no cancel: the target is killed, unless it finished
 * receiving, since past the commit point the source exits and the kill would lose the VM. To tell
 * the two apart at the moment of the kill, the agent freezes the VMM's process group (SIGSTOP),
 * reads the events it has not read yet and takes in an answer to the receive already arrived, then
 * either thaws it (finished: too late, the migration stands) or kills it and waits for the exit
 * (`failed`, reason `cancelled`; the VMM ends `destroyed`, cause `killed`, as asked). One window
 * is left: Cloud Hypervisor's target resumes the VM and writes its acknowledgement to the source
 * before it writes `migration-receive-finished`. Frozen between the two, the target is killed
 * while the source has its acknowledgement and exits `migrated`: both halves are gone, and the VM
 * with them. The control plane then sees a source `migrated` and a target `cancelled`, and must
 * treat the instance as crashed. The window is the few instructions between two writes, not a wait.
 *
 * The end. When a VMM's process ends with its half in progress, the events it wrote are read
 * first (its exit can overtake the file watch); a half still open then is `failed`.
 *
 * Restart (adoption). A half in progress is followed again from the start of its events (a
 * target's whole file, a source's from where its send was recorded), so what happened while no
 * agent watched is applied in order. A target's receive call was lost with the old agent: its API
 * is taken as held (pings skipped) until `vm.info` answers, which is when the receive is over. A
 * VM `Running` there is `finished`; anything else is `failed` and the kill (a receive whose sender
 * went away leaves no VM, or one half-built), unless there is no VM and no receive event shows at
 * all: the receive was never issued, and is issued now. A target frozen by a cancel the old agent did not
 * finish is thawed first; one recorded `failed` whose kill the old agent did not send is killed.
 */
import { isDeepStrictEqual } from 'node:util'
import type { Logger } from 'pino'
import type { SendMigrationRequest } from '../../domain/host-agent-api.js'
import { adoptedReceiveStep, halfStepOnEvent } from '../../domain/migration-half.js'
import { isFinalHalfPhase, isTerminalVmmState, type MigrationRole, type VmmMigration } from '../../domain/vmm.js'
import { crashPoint } from '../../faults/crash-points.js'
import type { VmState } from '../cloud-hypervisor/api-client.js'
import { VmmApiError } from '../cloud-hypervisor/errors.js'
import { eventFileSize, readEventFile, type VmmEvent } from '../cloud-hypervisor/event-monitor.js'
import { conflict, describeError, unavailable } from '../errors.js'
import type { MigrationOutcome } from '../metrics.js'
import type { VmmProcess } from '../process/vmm-process.js'
import type { AgentVmmRecord, OutgoingMigration, PendingKill } from '../store/record.js'
import type { MigrationTransport } from './migration-transport.js'
import type { VmmApi } from './vmm-api.js'

/** What a half needs of its VMM's supervisor (vmm-supervisor.ts). */
export interface MigratingVmm {
  readonly record: AgentVmmRecord
  readonly log: Logger
  /** Its API; a receive holds it (vmm-api.ts). */
  readonly api: VmmApi
  readonly eventsPath: string
  /** The VMM's process; null before it is spawned. */
  process: () => VmmProcess | null
  /** Applies a change and persists it; `bump` (the default) reports it. */
  update: (changes: Partial<AgentVmmRecord>, bump?: boolean) => Promise<void>
  /** Records why, then SIGKILLs the process group. */
  killFor: (pendingKill: PendingKill) => Promise<void>
  /** Resolves once every event written so far has been handled. */
  catchUpEvents: () => Promise<void>
  startConsole: () => void
  /** Waits until the end of a killed process is recorded; 503 past the bound. */
  waitForEnd: () => Promise<void>
}

export interface MigrationSettings {
  transport: MigrationTransport
  /** Called once per half that ends (the agent's metrics count them). */
  onEnded: (role: MigrationRole, outcome: MigrationOutcome) => void
}

/** How long to wait before asking again a VMM whose connections are all taken (503). */
const BUSY_RETRY_MS = 200
/** How long to wait before pausing again a VM the migration's worker has not given back yet. */
const PAUSE_RETRY_MS = 2

/** How Cloud Hypervisor refuses a change while the migration's worker owns the VM (VmError::VmMigrating). */
const STILL_MIGRATING = 'VM is currently migrating'
/** How it refuses to pause a paused VM, and to resume a running one (Vm::pause, Vm::resume). */
const PAUSED_ALREADY = 'InvalidStateTransition(Paused, Paused)'
const RUNNING_ALREADY = 'InvalidStateTransition(Running, Running)'

/** Whether the VMM refused a call with an error whose chain says `what`. */
function refusedAs (err: unknown, what: string): boolean {
  return err instanceof VmmApiError && err.chain.some((link) => link.includes(what))
}

export class MigrationHalf {
  /** Sends and cancels of this VMM, one at a time: a repeat finds what the first recorded. */
  #requests: Promise<unknown> = Promise.resolve()
  /** Set the moment the receive is answered 204, for a cancel to read while the VMM is frozen. */
  #received = false

  constructor (
    private readonly vmm: MigratingVmm,
    private readonly settings: MigrationSettings
  ) {}

  /** Whether the VMM has a half under way, which its events still move. */
  get inProgress (): boolean {
    const migration = this.vmm.record.migration
    return migration !== null && !isFinalHalfPhase(migration.phase)
  }

  /** A target that has not received its VM: its receive is under way, or failed and the VMM not yet killed. */
  get receiving (): boolean {
    const migration = this.vmm.record.migration
    return migration?.role === 'target' && migration.phase !== 'finished' && !isTerminalVmmState(this.vmm.record.state)
  }

  /** Where the events of the half in progress begin in the event file. */
  get eventsFrom (): number {
    return this.vmm.record.migration?.role === 'source' ? this.vmm.record.outgoing?.eventsFrom ?? 0 : 0
  }

  /** Applies one of the VMM's events to the half in progress (`halfStepOnEvent` decides); the task settles once it is recorded. */
  async onEvent (event: VmmEvent): Promise<void> {
    const { migration, outgoing } = this.vmm.record
    const next = halfStepOnEvent(migration, outgoing?.downtimeBegan === true, event)
    switch (next.step) {
      case 'none': return
      case 'advance': return await this.#advance(migration!, next.phase)
      case 'receive-finished': return await this.#finishReceive('migration-receive-finished')
      case 'receive-failed': return await this.#failReceive('Cloud Hypervisor reported migration-receive-failed')
      case 'send-started': return await this.#sendStarted(migration!)
      case 'downtime-began': return await this.#markDowntime()
      case 'iteration': return await this.vmm.update({ migration: { ...migration!, iterations: next.iterations, progressAt: now() } })
      case 'sent': return await this.#end('finished', null, { reason: `the VM migrated to ${outgoing?.destinationUrl ?? 'the target'}; the VMM exits` })
      case 'hold': return await this.#hold(migration!)
      case 'send-failed': return await this.#end('failed', 'Cloud Hypervisor reported migration-failed', { reason: `migration ${migration!.id} failed; the VM runs on here` })
    }
  }

  /** Before the VMM's end is recorded: the events the watch has not delivered, then a half still open fails. */
  async beforeEnd (why = 'the VMM process ended during the migration'): Promise<void> {
    if (!this.inProgress) return
    for (const event of (await readEventFile(this.vmm.eventsPath, this.eventsFrom)).events) await this.onEvent(event)
    await this.#end('failed', why)
  }

  // --- target ------------------------------------------------------------------------------

  /** Once the API answers, issues the receive and follows it to its end (a spawned target's background task). */
  async receive (): Promise<void> {
    const abort = this.vmm.api.hold()
    try {
      await this.vmm.api.waitUntilUp(abort.signal)
      await this.#issueReceive(abort.signal)
    } catch (err) {
      if (abort.signal.aborted || await this.vmm.api.diedDuring(err)) return
      await this.#failReceive(describeError(err))
    } finally {
      this.vmm.api.release(abort)
    }
  }

  /** A target adopted by a restarted agent: its receive call was lost with the old agent (module comment). */
  async resumeReceive (): Promise<void> {
    const { record } = this.vmm
    if (record.migration?.phase === 'failed') {
      await this.vmm.killFor(record.pendingKill ?? { cause: 'migration-failed', reason: this.#failedReason(record.migration.reason ?? 'unknown') })
      return
    }
    // A cancel freezes the target; an agent that died before it thawed or killed it left it so.
    this.vmm.process()?.signalGroup('SIGCONT')
    const abort = this.vmm.api.hold()
    try {
      const vmState = await this.#vmStateOnceFree(abort.signal)
      await this.vmm.catchUpEvents()
      const migration = this.vmm.record.migration
      if (migration === null || isFinalHalfPhase(migration.phase)) return
      switch (adoptedReceiveStep(vmState, migration.phase)) {
        case 'finish':
          await this.#finishReceive('vm.info shows the VM running here')
          break
        case 'issue-receive':
          this.vmm.log.info('no receive event and no VM: the receive was never issued; issuing it')
          await this.#issueReceive(abort.signal)
          break
        case 'fail':
          await this.#failReceive(`the receive ended while no agent watched, and the VM here is ${vmState ?? 'gone'}`)
      }
    } catch (err) {
      if (abort.signal.aborted || await this.vmm.api.diedDuring(err)) return
      await this.#failReceive(describeError(err))
    } finally {
      this.vmm.api.release(abort)
    }
  }

  /** Kills the target unless it has finished receiving; the caller answers the view (module comment). */
  async cancel (migrationId: string): Promise<void> {
    await this.#oneAtATime(async () => {
      const { record } = this.vmm
      if (record.incoming?.migrationId !== migrationId) throw conflict(`VMM ${record.id} is not the target of migration ${migrationId}`)
      const migration = record.migration
      // Committed (finished, or since the source of another migration), or concluded: nothing to kill.
      if (migration?.id !== migrationId || migration.phase === 'finished' || isTerminalVmmState(record.state)) return
      if (migration.phase !== 'failed') await this.#killUnlessCommitted(migration)
      if (this.vmm.record.migration?.phase === 'failed') await this.vmm.waitForEnd()
    })
  }

  async #killUnlessCommitted (migration: VmmMigration): Promise<void> {
    const vmmProcess = this.vmm.process()
    const frozen = vmmProcess?.signalGroup('SIGSTOP') ?? false
    try {
      // Frozen, the target writes nothing more: what it wrote, and an answer already in, are all.
      await this.vmm.catchUpEvents()
      if (this.#received) await this.#finishReceive('vm.receive-migration answered 204')
      if (!this.inProgress) return
      await this.#end('failed', 'cancelled', { reason: `migration ${migration.id} cancelled; the target VMM is killed` }, 'cancelled')
      await this.vmm.killFor({ cause: 'migration-cancelled', reason: `migration ${migration.id} cancelled; the target VMM was killed` })
    } finally {
      // A killed group dies frozen or not; one that finished must run on.
      if (frozen) vmmProcess?.signalGroup('SIGCONT')
    }
  }

  async #issueReceive (signal: AbortSignal): Promise<void> {
    const receiverUrl = this.vmm.record.migration!.receiverUrl!
    await this.settings.transport.clear(receiverUrl)
    try {
      await this.vmm.api.client.receiveMigration(receiverUrl, signal)
      this.#received = true
    } catch (err) {
      if (signal.aborted || await this.vmm.api.diedDuring(err)) throw err
      // Refused, or no answer from a VMM that lives on: whether the VM runs here is what counts (a
      // receive issued again is refused once the first brought the VM here). A receive whose
      // sender went away may leave its VM half-built, `Created` or `Paused`: that is a failure.
      const vmState = await this.#vmStateOnceFree(signal)
      await this.vmm.catchUpEvents()
      if (vmState === 'Running') await this.#finishReceive(`vm.info shows the VM running here after the receive answered: ${describeError(err)}`)
      else await this.#failReceive(describeError(err))
      return
    }
    await this.#finishReceive('vm.receive-migration answered 204')
  }

  /** The commit point: the VM runs here now. */
  async #finishReceive (how: string): Promise<void> {
    const { record } = this.vmm
    const migration = record.migration
    if (migration === null || isFinalHalfPhase(migration.phase)) return
    // A stop asked for meanwhile stands: the VMM stays `stopping`, and its presses resume.
    const running = record.state === 'starting' ? { state: 'running' as const, reason: `VM received by live migration ${migration.id} (${how}); it runs here now` } : {}
    await this.#end('finished', null, running)
    if (this.vmm.process()?.alive ?? false) this.vmm.startConsole()
  }

  /** The receive failed: the half is `failed` and the single-use target killed. */
  async #failReceive (why: string): Promise<void> {
    const migration = this.vmm.record.migration
    if (migration === null || isFinalHalfPhase(migration.phase)) return
    await this.#end('failed', why)
    await this.vmm.killFor({ cause: 'migration-failed', reason: this.#failedReason(why) })
  }

  #failedReason (why: string): string {
    return `migration ${this.vmm.record.incoming?.migrationId ?? ''} receive failed: ${why}; the target VMM is killed (a target is single-use)`
  }

  /** The VM's state once the API is free, waiting as long as a receive holds it; null without VM. */
  async #vmStateOnceFree (signal: AbortSignal): Promise<VmState | null> {
    for (;;) {
      try {
        return await this.#vmState(signal)
      } catch (err) {
        // Calls the old agent left may fill the VMM's ten connections until it answers them.
        if (!(err instanceof VmmApiError && err.status === 503) || signal.aborted) throw err
      }
      await new Promise((resolve) => setTimeout(resolve, BUSY_RETRY_MS))
    }
  }

  async #vmState (signal: AbortSignal): Promise<VmState | null> {
    try {
      return (await this.vmm.api.client.info(signal)).state
    } catch (err) {
      if (err instanceof VmmApiError && err.status === 404) return null
      throw err
    }
  }

  // --- source ------------------------------------------------------------------------------

  /** Records the send, then issues it; idempotent on the migration's ID (module comment). */
  async send (request: SendMigrationRequest): Promise<void> {
    await this.#oneAtATime(async () => {
      const { record } = this.vmm
      const current = record.migration
      if (current?.id === request.migrationId) {
        const { outgoing } = record
        if (current.role !== 'source' || outgoing === null || !isDeepStrictEqual(sendRequestOf(outgoing), request)) {
          throw conflict(`migration ${request.migrationId} of VMM ${record.id} was asked for with another role or other parameters`)
        }
        if (current.phase === 'sending' && !outgoing.accepted) await this.#sendAgainUnlessStarted()
        return
      }
      if (record.state !== 'running') throw conflict(`cannot send VMM ${record.id}: it is ${record.state}`)
      if (current !== null && !isFinalHalfPhase(current.phase)) throw conflict(`VMM ${record.id} has migration ${current.id} in progress`)
      if (current?.role === 'source' && current.phase === 'finished') throw conflict(`VMM ${record.id} has sent its VM away (migration ${current.id})`)
      const outgoing: OutgoingMigration = { ...request, eventsFrom: await eventFileSize(this.vmm.eventsPath), accepted: false, downtimeBegan: false }
      await this.vmm.update({
        migration: { id: request.migrationId, role: 'source', phase: 'sending', receiverUrl: null, iterations: 0, progressAt: now(), reason: null },
        outgoing,
        reason: `migration ${request.migrationId} to ${request.destinationUrl} requested`
      })
      await this.#issueSend()
    })
  }

  /** A source adopted by a restarted agent, or a retried send: issues a send not seen taken. */
  async #sendAgainUnlessStarted (): Promise<void> {
    await this.vmm.catchUpEvents()
    if (!this.inProgress || this.vmm.record.outgoing?.accepted !== false) return
    this.vmm.log.info('the send is recorded but was never seen taken; issuing it again')
    await this.#issueSend()
  }

  /** Adoption: a send the old agent recorded but may not have issued. */
  async resumeSend (): Promise<void> {
    await this.#oneAtATime(async () => { await this.#sendAgainUnlessStarted() })
  }

  /** The control plane's word that the target does not have the VM: a held source resumes it (module comment). */
  async resumeHeld (migrationId: string): Promise<void> {
    await this.#oneAtATime(async () => {
      const migration = this.vmm.record.migration
      if (migration?.id !== migrationId || migration.role !== 'source') throw conflict(`VMM ${this.vmm.record.id} is not the source of migration ${migrationId}`)
      // Resumed already: a retried call.
      if (migration.phase === 'failed') return
      if (migration.phase !== 'held') throw conflict(`VMM ${this.vmm.record.id} is ${migration.phase} in migration ${migrationId}: only a held source resumes`)
      await this.#resumeHere()
      await this.#end('failed', migration.reason, { reason: `migration ${migrationId} failed, and its target does not have the VM: resumed here` })
    })
  }

  async #markDowntime (): Promise<void> {
    const { outgoing } = this.vmm.record
    if (outgoing === null || outgoing.downtimeBegan) return
    await this.vmm.update({ outgoing: { ...outgoing, downtimeBegan: true } }, false)
  }

  /** The send failed past the downtime: the VM is paused here, then the half is `held` (module comment). */
  async #hold (migration: VmmMigration): Promise<void> {
    await this.#pauseHere()
    // The VMM may have ended meanwhile (killed, or its resume failed): its end records the half.
    const current = this.vmm.record.migration
    if (current?.id !== migration.id || current.phase !== 'sending' || isTerminalVmmState(this.vmm.record.state)) return
    const why = 'Cloud Hypervisor reported migration-failed after the downtime began: the target may run the VM'
    await this.vmm.update({
      migration: { ...migration, phase: 'held', progressAt: now(), reason: why },
      reason: `migration ${migration.id} failed after its downtime began; the VM is paused here until the control plane says which side has it`
    })
  }

  /**
   * Pauses the VM, once its VMM has it back from the migration's worker; done when paused,
   * already paused, or the process is gone. Anything else (an API that does not answer) is tried
   * again for as long as the process lives: the guest must not run on here.
   */
  async #pauseHere (): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      let retryMs = PAUSE_RETRY_MS
      try {
        await this.vmm.api.client.pauseVm()
        return
      } catch (err) {
        if (await this.vmm.api.diedDuring(err) || refusedAs(err, PAUSED_ALREADY)) return
        if (!refusedAs(err, STILL_MIGRATING)) {
          if (attempt % 20 === 1) this.vmm.log.warn({ err: describeError(err), attempt }, 'cannot pause the VM held by a failed migration yet; trying again')
          retryMs = BUSY_RETRY_MS
        }
      }
      await new Promise((resolve) => setTimeout(resolve, retryMs))
    }
  }

  async #resumeHere (): Promise<void> {
    try {
      await this.vmm.api.client.resumeVm()
    } catch (err) {
      if (!refusedAs(err, RUNNING_ALREADY)) throw err
    }
  }

  async #issueSend (): Promise<void> {
    const { migrationId, destinationUrl, downtimeMs, timeoutS } = this.vmm.record.outgoing!
    try {
      await this.vmm.api.client.sendMigration({ destination_url: destinationUrl, downtime_ms: downtimeMs, timeout_s: timeoutS })
    } catch (err) {
      if (await this.vmm.api.diedDuring(err)) return
      if (!(err instanceof VmmApiError)) throw unavailable(`the send of migration ${migrationId} got no answer (${describeError(err)}); ask again`)
      await this.vmm.catchUpEvents()
      if (this.vmm.record.outgoing?.accepted === true || !this.inProgress) {
        this.vmm.log.warn({ err: err.message }, 'a send issued again was refused: the first one is under way')
        return
      }
      await this.#end('failed', err.message, { reason: `migration ${migrationId} refused by the VMM; the VM runs on here` })
      return
    }
    await this.#markAccepted()
    crashPoint('agent.migration.after-send')
  }

  async #sendStarted (migration: VmmMigration): Promise<void> {
    if (this.vmm.record.outgoing?.accepted !== false) return
    await this.vmm.update({
      migration: { ...migration, progressAt: now() },
      outgoing: { ...this.vmm.record.outgoing, accepted: true },
      reason: `migration ${migration.id} started`
    })
  }

  async #markAccepted (): Promise<void> {
    const { outgoing } = this.vmm.record
    if (outgoing === null || outgoing.accepted) return
    await this.vmm.update({ outgoing: { ...outgoing, accepted: true } }, false)
  }

  // --- both --------------------------------------------------------------------------------

  /** Moves a target's half to a later phase that is not final. */
  async #advance (migration: VmmMigration, phase: 'ready' | 'receiving'): Promise<void> {
    await this.vmm.update({ migration: { ...migration, phase, progressAt: now() } })
    if (phase === 'ready') crashPoint('agent.migration.after-receive')
  }

  /**
   * Ends the half in progress, with other changes of the same record write; once only. A target's
   * socket, if it has one, goes: Cloud Hypervisor leaves it behind.
   */
  async #end (phase: 'finished' | 'failed', why: string | null, changes: Partial<AgentVmmRecord> = {}, outcome: MigrationOutcome = phase): Promise<void> {
    const migration = this.vmm.record.migration
    if (migration === null || isFinalHalfPhase(migration.phase)) return
    await this.vmm.update({ ...changes, migration: { ...migration, phase, progressAt: now(), reason: why } })
    this.settings.onEnded(migration.role, outcome)
    if (migration.receiverUrl !== null) await this.settings.transport.clear(migration.receiverUrl)
  }

  async #oneAtATime (task: () => Promise<void>): Promise<void> {
    const run = this.#requests.catch(() => {}).then(task)
    this.#requests = run
    await run
  }
}

function sendRequestOf ({ migrationId, destinationUrl, downtimeMs, timeoutS }: OutgoingMigration): SendMigrationRequest {
  return { migrationId, destinationUrl, downtimeMs, timeoutS }
}

function now (): string {
  return new Date().toISOString()
}
