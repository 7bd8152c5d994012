/**
 * One VMM's life, from its record to its end.
 *
 * Theory of operation
 *
 * The record comes first (I3). The VMM's record exists on disk before its process is spawned,
 * gains the process identity (PID and start time) right after, and every decision the agent
 * takes about the process is recorded before it acts: `destroyRequested` before the kill of a
 * DELETE, `pendingKill` before the kill at a stop deadline or after a failed boot. An agent that
 * dies at any point therefore finds, on restart, either the process (and adopts it) or the
 * reason it is gone.
 *
 * The process is watched, never assumed. The end of a VMM is observed, not inferred: the exit
 * event of a child this agent spawned, or, for a process adopted from an earlier agent, its
 * disappearance from /proc (PID and start time). Only then does the VMM become `destroyed` or
 * `failed` (exit-classification.ts). An API that stops answering is a condition
 * (`unresponsiveSince`), not an end (I2).
 *
 * Long calls do not block short ones. `vm.boot`, `vm.reboot` and a migration target's
 * `vm.receive-migration` run in the background with an AbortController; while one runs the VMM
 * answers nothing else, so pings and power-button presses are skipped rather than queued behind
 * it, and a kill aborts it.
 *
 * Devices come before the process. The VMM's disks, seed and TAPs (vmm-devices.ts) are made,
 * or found, after its record is written and before its process is spawned; a VMM whose devices
 * cannot be made fails its boot without a process. Its TAPs are removed once the process is
 * gone and before its end is recorded, so a VMM reported gone has left nothing on the host
 * (its disks stay: they belong to the instance). The serial console is relayed and logged from
 * the VM's creation to the process's end (console/serial-console.ts).
 *
 * Stops end in a kill (I1). A power button with a deadline records the deadline, presses now
 * and at every interval, and arms a timer that kills the process group at the deadline whatever
 * the API or the guest does; a restarted agent re-arms it from the record. The deadline is a
 * time on this host's clock, made from the time left the control plane sent (routes.ts), so the
 * record, the comparison of two deadlines and the timer all read one clock.
 *
 * Live migration (vmm-migration.ts). A VMM ensured as a migration's target starts empty and
 * receives its VM instead of booting one; a running VMM may send its VM to a target. Its half of
 * the migration moves with its events, and a stop or a kill of either half works as on any VMM.
 *
 * Every change the control plane should hear about bumps `generation`, is persisted, and is
 * handed to the report outbox (`onChange`). What the agent says of the VMM (`view`, `durable`:
 * its API's answers and its reports) is the record as last saved, never a change still being
 * saved: an agent killed before the save comes back without the change, and must not have told
 * anyone of it (a VMM seen `running` came back `starting`, spawned again).
 */
import { writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { VmmPolicy, VmmView } from '../../domain/host-agent-api.js'
import { isTerminalVmmState, type MigrationRole } from '../../domain/vmm.js'
import type { VmState } from '../cloud-hypervisor/api-client.js'
import { VmmApiError } from '../cloud-hypervisor/errors.js'
import { EventFileTail, readEventFile, type VmmEvent } from '../cloud-hypervisor/event-monitor.js'
import { SERIAL_SOCKET, vmmPaths, type VmmPaths } from '../cloud-hypervisor/launch.js'
import { buildVmConfig, type ResolvedBootFiles } from '../cloud-hypervisor/vm-config.js'
import { SerialConsole } from '../console/serial-console.js'
import { crashPoint } from '../../faults/crash-points.js'
import { conflict, describeError, unavailable } from '../errors.js'
import type { KillCause, MigrationOutcome } from '../metrics.js'
import type { ProcessIdentity } from '../process/proc.js'
import { VmmProcess, type ExitObservation } from '../process/vmm-process.js'
import type { RecordStore } from '../store/record-store.js'
import { watchdogFiredSince } from '../store/watchdog-mark.js'
import { toView, type AgentVmmRecord, type PendingKill } from '../store/record.js'
import { classifyExit } from './exit-classification.js'
import type { MigrationTransport } from './migration-transport.js'
import { removeSocketFiles } from './socket-files.js'
import type { VmmDevices } from './vmm-devices.js'
import { VmmApi } from './vmm-api.js'
import { MigrationHalf } from './vmm-migration.js'

export interface VmmSettings {
  hostId: string
  cloudHypervisor: string
  vmmCallTimeoutMs: number
  vmmPingIntervalMs: number
  powerButtonIntervalMs: number
  /** How often an adopted process's /proc entry is checked. */
  processPollMs: number
  /** How long a new VMM's API may take to come up. */
  apiReadyTimeoutMs: number
  /** How long a kill waits for the process to exit. */
  killWaitMs: number
  /** What goes before the program on its command line (launch.ts `vmmCommandPrefix`). */
  commandPrefix: string[]
  /** The serial log's size cap, in bytes. */
  serialLogBytes: number
}

export interface VmmContext {
  settings: VmmSettings
  store: RecordStore
  devices: VmmDevices
  /** Where migration targets listen. */
  transport: MigrationTransport
  log: Logger
  /** Called after every change that bumped the generation. */
  onChange: (vmm: VmmSupervisor) => void
  /** Called for every SIGKILL sent to a VMM process (the agent's metrics count them). */
  onKill: (cause: KillCause) => void
  /** Called once for each half of a migration that ends (the agent's metrics count them). */
  onMigrationEnded: (role: MigrationRole, outcome: MigrationOutcome) => void
  /** Why no new VMM may be made now (the host holds no lease, host-agent/lease/), or null. */
  refusesNewVmms: () => string | null
}

/** setTimeout's limit; a later deadline is re-armed when this one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1

export class VmmSupervisor {
  readonly paths: VmmPaths
  readonly log: Logger
  #process: VmmProcess | null = null
  readonly #api: VmmApi
  readonly console: SerialConsole
  /** The VMM's half of a live migration, if it has one. */
  readonly migration: MigrationHalf
  #tail: EventFileTail | null = null
  #agentRebootInFlight = false
  #pingTimer: NodeJS.Timeout | null = null
  #pingInFlight = false
  #pressTimer: NodeJS.Timeout | null = null
  #pressInFlight = false
  #deadlineTimer: NodeJS.Timeout | null = null
  /** Settles once the end of the process has been recorded. */
  #concluded: Promise<void> | null = null
  /** Settles when the boot `spawn` began has ended, whatever its end (`awaitBoot`). */
  #booting: Promise<void> | null = null
  /** Ensures waiting in `awaitBoot`: while any does, a change is carried by their answers. */
  #answersPending = 0
  /** The record as last saved (module comment). */
  #durable: AgentVmmRecord

  constructor (
    private readonly context: VmmContext,
    readonly record: AgentVmmRecord
  ) {
    // A record handed over is saved already: loaded from disk, or recorded before its supervisor.
    this.#durable = structuredClone(record)
    this.paths = vmmPaths(context.store.dirOf(record.id))
    this.log = context.log.child({ vmmId: record.id, instanceId: record.instanceId })
    this.#api = new VmmApi(this.paths.apiSocket, {
      callTimeoutMs: context.settings.vmmCallTimeoutMs,
      readyTimeoutMs: context.settings.apiReadyTimeoutMs
    }, () => this.#process)
    this.console = new SerialConsole(this.paths.console, this.paths.serialLog, context.settings.serialLogBytes, this.log)
    this.migration = new MigrationHalf({
      record,
      log: this.log,
      api: this.#api,
      eventsPath: this.paths.events,
      process: () => this.#process,
      update: async (changes, bump) => { await this.#update(changes, bump) },
      killFor: async (pendingKill) => { await this.#killFor(pendingKill) },
      catchUpEvents: async () => { await this.#tail?.catchUp() },
      startConsole: () => { this.console.start() },
      waitForEnd: async () => { await this.#waitForEnd() }
    }, { transport: context.transport, onEnded: context.onMigrationEnded })
  }

  get id (): string {
    return this.record.id
  }

  /** The record as last saved: what the agent may say of the VMM. */
  get durable (): Readonly<AgentVmmRecord> {
    return this.#durable
  }

  get terminal (): boolean {
    return isTerminalVmmState(this.record.state)
  }

  view (): VmmView {
    return toView(this.#durable, this.context.settings.hostId)
  }

  /**
   * Makes the devices of a `starting` VMM whose record is on disk, starts its process, then boots
   * it in the background, or, for a migration's target, has it receive its VM.
   */
  async spawn (): Promise<void> {
    const incoming = this.record.incoming !== null
    let bootFiles: ResolvedBootFiles | null = null
    try {
      if (incoming) await this.context.devices.prepareIncoming(this.record.instanceId, this.record.spec)
      else bootFiles = await this.context.devices.prepare(this.record.instanceId, this.record.spec)
    } catch (err) {
      await this.#failWithoutProcess(`cannot prepare the VM's devices: ${describeError(err)}`)
      return
    }
    // The event file exists before the process, so the tail can follow it from the first event
    // (the VMM opens it with truncate, which keeps the file the tail watches).
    await writeFile(this.paths.events, '', { mode: 0o600 })
    let vmmProcess: VmmProcess
    try {
      vmmProcess = await VmmProcess.spawn(this.context.settings.cloudHypervisor, this.paths, this.context.settings.commandPrefix)
    } catch (err) {
      await this.#failWithoutProcess(`cannot start ${this.context.settings.cloudHypervisor}: ${describeError(err)}`)
      return
    }
    this.log.info({ pid: vmmProcess.pid }, 'VMM process started')
    await this.#update({ pid: vmmProcess.pid, pidStartTime: vmmProcess.startTime }, false)
    crashPoint(incoming ? 'agent.migration.after-target-spawn' : 'agent.ensure.after-spawn')
    this.#attach(vmmProcess, 0)
    if (incoming) {
      this.#background(this.migration.receive(), 'migration receive')
      return
    }
    const boot = this.#boot(bootFiles, false)
    this.#background(boot, 'boot')
    this.#booting = boot.catch(() => {})
  }

  /**
   * Waits, at most `limitMs`, for the boot `spawn` began to end, so that an ensure's answer says
   * how it ended (`running`, or `failed` and why) where it said `starting`. A change saved while
   * an answer waits here goes to the caller in that answer and not through the outbox: on a
   * healthy host a create then gets no report at all, only its answers (supervisor.ts). An
   * answer that never arrives loses nothing: the caller asks again (an ensure is idempotent) and
   * is answered with the record as it is, and a restarted agent reports every live VMM.
   */
  async awaitBoot (limitMs: number): Promise<void> {
    if (this.#booting === null) return
    const timer = new AbortController()
    this.#answersPending++
    try {
      await Promise.race([this.#booting, delay(limitMs, undefined, { signal: timer.signal }).catch(() => {})])
    } finally {
      this.#answersPending--
      timer.abort()
    }
  }

  /** A boot that failed before there was a process: nothing runs, only the devices are released. */
  async #failWithoutProcess (reason: string): Promise<void> {
    this.log.warn({ reason }, 'VMM failed before its process started')
    await this.#releaseDevices()
    await this.migration.beforeEnd(reason)
    await this.#update({ state: 'failed', exit: { cause: 'boot-failed', code: null, signal: null }, reason })
  }

  /** Takes over a live VMM process started by an earlier agent and resumes what it was doing. */
  async adopt (identity: ProcessIdentity): Promise<void> {
    if (this.record.pid !== identity.pid || this.record.pidStartTime !== identity.startTime) {
      await this.#update({ pid: identity.pid, pidStartTime: identity.startTime }, false)
    }
    this.log.info({ pid: identity.pid, state: this.record.state }, 'adopted running VMM process')
    // A half in progress is followed from where its events begin: what happened meanwhile is applied in order.
    this.#attach(VmmProcess.adopt(identity, this.context.settings.processPollMs), this.migration.inProgress ? this.migration.eventsFrom : 'end')
    // A target's console is relayed from the commit point on.
    if (!this.migration.receiving) this.console.start()
    if (this.migration.receiving) this.#background(this.migration.resumeReceive(), 'resumed migration receive')
    else if (this.record.state === 'starting') this.#background(this.#boot(null, true), 'resumed boot')
    if (this.record.state === 'rebooting') this.#background(this.#settleInterruptedReboot(), 'resumed reboot')
    if (this.record.migration?.role === 'source' && this.migration.inProgress) this.#background(this.migration.resumeSend(), 'resumed migration send')
    if (this.record.stopDeadline !== null && !this.terminal) this.#armStop()
  }

  /** Records the end of a VMM whose process died while no agent was watching. */
  async concludeVanished (): Promise<void> {
    await this.#conclude({ known: false })
  }

  /** Presses the power button: once, or, with a deadline, until the deadline and then kills. */
  async pressPowerButton (deadline: Date | null): Promise<void> {
    this.#refuseIfTerminal('press the power button of')
    if (deadline === null) {
      await this.#pressOnceNow()
      return
    }
    const current = this.record.stopDeadline === null ? null : new Date(this.record.stopDeadline)
    if (current === null || deadline < current) {
      await this.#update({
        state: 'stopping',
        stopDeadline: deadline.toISOString(),
        reason: `stop requested: power button pressed; the VMM is killed at ${deadline.toISOString()} unless the guest powers off`
      })
      crashPoint('agent.stop.after-deadline')
    }
    this.#armStop()
  }

  async reboot (): Promise<void> {
    if (this.record.state !== 'running') throw conflict(`cannot reboot VMM ${this.id}: it is ${this.record.state}`)
    // The VM belongs to the migration: Cloud Hypervisor refuses, and a failed reboot kills the VMM.
    if (this.migration.inProgress) throw conflict(`cannot reboot VMM ${this.id}: it is migrating`)
    await this.#update({ state: 'rebooting', reason: 'reboot requested' })
    this.#background(this.#reboot(), 'reboot')
  }

  /**
   * Kills the VMM and waits for it (DELETE). Idempotent. Rejects with 503 when the process has
   * not exited within the bound, so the caller retries.
   */
  async destroy (): Promise<void> {
    if (this.record.state === 'destroyed') return
    if (this.terminal) {
      await removeSocketFiles(this.paths.apiSocket)
      await this.#releaseDevices()
      await this.#update({
        state: 'destroyed',
        destroyRequested: true,
        reason: `destroyed on request; it had ${this.record.state}: ${this.record.reason ?? 'no reason recorded'}`
      })
      return
    }
    if (!this.record.destroyRequested) await this.#update({ destroyRequested: true }, false)
    const vmmProcess = this.#process
    if (vmmProcess === null) {
      await this.#conclude({ known: false })
      return
    }
    this.#kill('destroy', 'destroy requested')
    crashPoint('agent.destroy.after-kill')
    await this.#waitForEnd()
  }

  /** Waits for a killed process to exit and its end to be recorded; 503 past the bound, so the caller retries. */
  async #waitForEnd (): Promise<void> {
    const vmmProcess = this.#process
    if (vmmProcess !== null && await vmmProcess.waitForExit(this.context.settings.killWaitMs) === null) {
      throw unavailable(`VMM ${this.id} (pid ${vmmProcess.pid}) has not exited yet after SIGKILL; retry`)
    }
    await this.#concluded
  }

  /** Records that Temporal accepted the report of `generation`. */
  async markReported (generation: number): Promise<void> {
    if (generation <= this.record.reportedGeneration) return
    await this.#update({ reportedGeneration: generation }, false)
  }

  /** Stops watching the VMM without touching its process: the agent is shutting down. */
  release (): void {
    this.#stopTimers()
    this.console.stop().catch(() => {})
    this.#tail?.stop()
    this.#api.abortHeld()
    this.#process?.release()
    this.#api.close()
  }

  // --- the process -------------------------------------------------------------------------

  #attach (vmmProcess: VmmProcess, tailFrom: number | 'end'): void {
    this.#process = vmmProcess
    this.#concluded = vmmProcess.exited.then((observed) => this.#conclude(observed))
    this.#startTail(tailFrom)
    this.#pingTimer = setInterval(() => { this.#pingOnce() }, this.context.settings.vmmPingIntervalMs)
    this.#pingTimer.unref()
  }

  /** Kills the VMM, its end recorded as the host's fencing. */
  async fence (reason: string): Promise<void> {
    await this.#killFor({ cause: 'fenced', reason })
  }

  #kill (cause: KillCause, why: string): void {
    this.#api.abortHeld()
    const sent = this.#process?.killGroup() ?? false
    if (sent) this.context.onKill(cause)
    this.log.warn({ pid: this.#process?.pid, sent }, `SIGKILL to the VMM's process group: ${why}`)
  }

  async #killFor (pendingKill: PendingKill): Promise<void> {
    if (this.terminal) return
    await this.#update({ pendingKill }, false)
    this.#kill(pendingKill.cause, pendingKill.reason)
  }

  async #conclude (observed: ExitObservation): Promise<void> {
    this.release()
    if (this.terminal) return
    await this.migration.beforeEnd()
    const { endsWithVmmShutdown } = observed.known
      ? { endsWithVmmShutdown: false }
      : await readEventFile(this.paths.events)
    const fencedByWatchdog = await watchdogFiredSince(dirname(this.context.store.vmmsDir), Date.parse(this.record.createdAt))
    const outcome = classifyExit({ ...this.record, fencedByWatchdog }, observed, endsWithVmmShutdown)
    await removeSocketFiles(this.paths.apiSocket)
    await this.#releaseDevices()
    const log = outcome.state === 'failed' ? this.log.warn.bind(this.log) : this.log.info.bind(this.log)
    log({ exit: outcome.exit }, `VMM ${outcome.state}: ${outcome.reason}`)
    await this.#update({ state: outcome.state, exit: outcome.exit, reason: outcome.reason, unresponsiveSince: null })
    // Ended, it no longer keeps its networks' segments or the ones its policy routes to.
    await this.context.devices.applyPolicies().catch((err: Error) => {
      this.log.warn({ err: err.message }, "cannot remove the VMM's segments or rebuild the firewall; the reconciler's pass does")
    })
  }

  /** Removes the VMM's TAPs; one that cannot be removed is logged and left to the reconciler. */
  async #releaseDevices (): Promise<void> {
    await this.context.devices.release(this.record.spec).catch((err: Error) => {
      this.log.warn({ err: err.message }, "cannot remove the VMM's TAPs; the reconciler reaps them")
    })
  }

  // --- boot and reboot ---------------------------------------------------------------------

  /** Waits for the API, then creates and boots the VM; `resume` starts from what vm.info says. */
  async #boot (bootFiles: ResolvedBootFiles | null, resume: boolean): Promise<void> {
    const abort = this.#api.hold()
    try {
      await this.#api.waitUntilUp(abort.signal)
      const vmState = resume ? await this.#vmState() : null
      if (vmState === null) {
        const files = bootFiles ?? await this.context.devices.prepare(this.record.instanceId, this.record.spec)
        await this.#api.client.createVm(buildVmConfig(this.record.spec, files, SERIAL_SOCKET))
      }
      this.console.start()
      if (vmState === null || vmState === 'Created' || vmState === 'Shutdown') await this.#api.client.bootVm(abort.signal)
      this.#api.release(abort)
      if (this.record.state === 'starting') await this.#update({ state: 'running', reason: 'VM booted' })
      if (this.record.state === 'stopping') this.#pressOnce()
    } catch (err) {
      if (abort.signal.aborted || this.terminal || await this.#api.diedDuring(err)) return
      await this.#killFor({ cause: 'boot-failed', reason: `boot failed: ${describeError(err)}` })
    } finally {
      this.#api.release(abort)
    }
  }

  /** The VM's state from vm.info; null when the VMM holds no VM yet (404). */
  async #vmState (): Promise<VmState | null> {
    try {
      return (await this.#api.client.info()).state
    } catch (err) {
      if (err instanceof VmmApiError && err.status === 404) return null
      throw err
    }
  }

  async #reboot (): Promise<void> {
    const abort = this.#api.hold()
    this.#agentRebootInFlight = true
    try {
      await this.#api.client.rebootVm(abort.signal)
      await this.#tail?.catchUp()
      this.#api.release(abort)
      if (this.record.state === 'rebooting') await this.#update({ state: 'running', reason: 'VM rebooted' })
    } catch (err) {
      this.#api.release(abort)
      if (abort.signal.aborted || this.record.state !== 'rebooting' || await this.#api.diedDuring(err)) return
      // The old VM may be half torn down inside a live process: nothing to trust. The control
      // plane replaces a VMM that does not come back from a reboot (docs/design.md §4).
      await this.#killFor({ cause: 'boot-failed', reason: `reboot failed: ${describeError(err)}` })
    } finally {
      this.#agentRebootInFlight = false
      this.#api.release(abort)
    }
  }

  /** A reboot was in flight when the previous agent died: vm.info tells how it ended. */
  async #settleInterruptedReboot (): Promise<void> {
    const vmState = await this.#vmState()
    if (this.record.state !== 'rebooting') return
    await this.#update(vmState === 'Running'
      ? { state: 'running', reason: 'VM rebooted' }
      : { state: 'running', reason: `reboot interrupted by an agent restart; the VM is ${vmState ?? 'not created'}` })
  }

  // --- stop --------------------------------------------------------------------------------

  /** Presses now and at every interval, and kills at the deadline (re-armed after a restart). */
  #armStop (): void {
    if (this.#deadlineTimer !== null) clearTimeout(this.#deadlineTimer)
    const deadline = new Date(this.record.stopDeadline!).getTime()
    const delay = Math.max(0, deadline - Date.now())
    this.#deadlineTimer = setTimeout(() => {
      this.#deadlineTimer = null
      if (Date.now() < deadline) {
        this.#armStop()
        return
      }
      this.#background(this.#killFor({ cause: 'stop-deadline', reason: 'stop grace period expired; VMM killed' }), 'kill at deadline')
    }, Math.min(delay, MAX_TIMER_MS))
    if (this.#pressTimer === null) {
      this.#pressTimer = setInterval(() => { this.#pressOnce() }, this.context.settings.powerButtonIntervalMs)
      this.#pressOnce()
    }
  }

  /** A press that never waits: skipped while a long call holds the API or a press is pending. */
  #pressOnce (): void {
    if (this.#pressInFlight || this.#api.held || this.terminal) return
    this.#pressInFlight = true
    this.#api.client.powerButton()
      .then(() => { this.log.info('power button pressed') })
      .catch((err: Error) => { this.log.warn({ err: err.message }, 'power button press failed') })
      .finally(() => { this.#pressInFlight = false })
  }

  /** A single press whose outcome the caller waits for (a power button without deadline). */
  async #pressOnceNow (): Promise<void> {
    if (this.#api.held) throw conflict(`VMM ${this.id} is busy with a boot, a reboot or a migration's receive; its API answers nothing else`)
    try {
      await this.#api.client.powerButton()
    } catch (err) {
      // The VMM answered: the VM is not in a state to take it (not booted yet, or shut down).
      if (err instanceof VmmApiError) throw conflict(`power button refused by the VMM: ${err.message}`)
      throw unavailable(`power button not delivered: ${describeError(err)}`)
    }
    this.log.info('power button pressed once')
  }

  // --- observation -------------------------------------------------------------------------

  #startTail (from: number | 'end'): void {
    const tail = new EventFileTail(this.paths.events)
    tail.on('event', (event) => { this.#onEvent(event) })
    tail.on('garbage', (text) => { this.log.warn({ garbage: text.slice(0, 200) }, 'event file holds text that is not an event') })
    tail.on('unreadable', (err) => { this.log.warn({ err: err.message }, 'cannot read the event file') })
    this.#tail = tail
    tail.start(from).catch((err: Error) => { this.log.warn({ err: err.message }, 'cannot follow the event file') })
  }

  #onEvent (event: VmmEvent): void {
    this.log.debug({ event: `${event.source} ${event.event}`, properties: event.properties }, 'VMM event')
    this.#background(this.migration.onEvent(event), 'record a migration event')
    if (event.source === 'guest' && event.event === 'panic' && !this.terminal) {
      this.#background(this.#update({ reason: 'the guest kernel panicked' }), 'record guest panic')
    }
    if (event.source !== 'vm' || this.#agentRebootInFlight) return
    if (event.event === 'rebooting' && this.record.state === 'running') {
      this.#background(this.#update({ state: 'rebooting', reason: 'the guest is rebooting' }), 'record guest reboot')
    } else if (event.event === 'rebooted' && this.record.state === 'rebooting') {
      this.#background(this.#update({ state: 'running', reason: 'the guest rebooted' }), 'record guest reboot')
    }
  }

  #pingOnce (): void {
    if (this.#pingInFlight || this.#api.held || this.terminal || this.record.state === 'starting') return
    this.#pingInFlight = true
    this.#api.client.ping()
      .then(async () => {
        if (this.record.unresponsiveSince !== null && !this.terminal) {
          await this.#update({ unresponsiveSince: null, reason: 'the VMM API answers again' })
        }
      }, async (err: Error) => {
        if (this.record.unresponsiveSince !== null || this.terminal || !(this.#process?.alive ?? false)) return
        await this.#update({ unresponsiveSince: new Date().toISOString(), reason: `the VMM API does not answer: ${err.message}` })
      })
      .catch((err: Error) => { this.log.error({ err: err.message }, 'cannot record the VMM API condition') })
      .finally(() => { this.#pingInFlight = false })
  }

  /** Keeps the policy if it is newer than the one the record has; whether it did. */
  async takePolicy (policy: VmmPolicy): Promise<boolean> {
    if (this.terminal || (this.record.policy !== null && this.record.policy.generation >= policy.generation)) return false
    await this.#update({ policy }, false)
    return true
  }

  // --- bookkeeping -------------------------------------------------------------------------

  #refuseIfTerminal (action: string): void {
    if (this.terminal) throw conflict(`cannot ${action} VMM ${this.id}: it is ${this.record.state}`)
  }

  #stopTimers (): void {
    for (const timer of [this.#pingTimer, this.#pressTimer]) if (timer !== null) clearInterval(timer)
    if (this.#deadlineTimer !== null) clearTimeout(this.#deadlineTimer)
    this.#pingTimer = this.#pressTimer = this.#deadlineTimer = null
  }

  /**
   * Applies a change and persists it. `bump` marks a change the control plane should hear
   * about: it gets a new generation and goes to the outbox.
   */
  async #update (changes: Partial<AgentVmmRecord>, bump = true): Promise<void> {
    Object.assign(this.record, changes)
    if (bump) {
      this.record.generation++
      this.record.updatedAt = new Date().toISOString()
    }
    const saving = structuredClone(this.record)
    await this.context.store.save(saving)
    // Saves of one record complete in the order they were asked for (record-store.ts).
    this.#durable = saving
    // An answer waiting in `awaitBoot` reads the record once it stops waiting: it carries this.
    if (bump && this.#answersPending === 0) this.context.onChange(this)
  }

  /** Runs a background task; it must never take the agent down, so failures are logged. */
  #background (task: Promise<void>, what: string): void {
    task.catch((err: Error) => { this.log.error({ err: err.message }, `${what} failed`) })
  }
}
