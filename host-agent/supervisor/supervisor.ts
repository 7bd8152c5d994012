/**
 * The agent's VMMs: ensure, look up, stop, reboot and destroy them by ID, and take them over
 * when the agent starts.
 *
 * Theory of operation
 *
 * Ensure is idempotent on the VMM ID (I3). The first ensure of an ID checks the images it names
 * (refusing names that escape the image directory), writes the record, and only then makes the
 * VMM's devices and spawns the process. Any later ensure of that ID returns the same VMM;
 * concurrent ones wait for the first. An ensure with `incoming` makes a live migration's target
 * (vmm-migration.ts): its receiver URL is chosen (migration-transport.ts) and recorded with it,
 * and a repeat must name the same migration. An ensure's answer waits (BOOT_ANSWER_WAIT_MS at
 * most) for the VMM's boot to end, and is its report: neither `starting` nor what the boot came to
 * (`running`, or `failed` and why) goes through the outbox while an answer carries it
 * (vmm-supervisor.ts `awaitBoot`), so a create on a healthy host takes no signal, no workflow task
 * for one, and no timer for its boot deadline. An ID that belongs to another instance, or whose
 * VMM was destroyed, is refused with 409: the record of a destroyed VMM is a tombstone, so a retry
 * that arrives after a delete can never bring the VMM back.
 *
 * Start-up adopts instead of killing. Each record's process is looked for (adoption.ts): found,
 * it is adopted and resumes what it was doing (a boot, a reboot, a stop with its deadline, a
 * migration); not found, a VMM that never got past `starting` is spawned again (a migration's
 * target only if it never had a process: a target is single-use), and any other is recorded as
 * ended with what its event file says. VMM processes of this agent's making that no record owns
 * are killed; one whose record exists but cannot be read is left alone and logged, since nobody
 * can tell what it is. The current state of every live VMM, and every report not yet accepted,
 * is then reported again.
 *
 * Terminal records stay as tombstones for a day once their last report was accepted, then are
 * removed with their directory.
 */
import { isDeepStrictEqual } from 'node:util'
import type { Logger } from 'pino'
import type { MigrationOfCall, EnsureVmmRequest, SendMigrationRequest, StrayView, TapView, VmmPolicy, VmmView } from '../../domain/host-agent-api.js'
import { tapNameOf } from '../../domain/interfaces.js'
import { vmmPaths } from '../cloud-hypervisor/launch.js'
import { crashPoint } from '../../faults/crash-points.js'
import { conflict, notFound, unavailable } from '../errors.js'
import { isRunning, startedAt, type RunningProcess } from '../process/proc.js'
import type { AgentVmmRecord } from '../store/record.js'
import { findVmmProcesses, killVmmProcesses } from './adoption.js'
import type { VmmDevices } from './vmm-devices.js'
import { VmmSupervisor, type VmmContext } from './vmm-supervisor.js'

const TOMBSTONE_TTL_MS = 24 * 60 * 60 * 1000
/**
 * How long an ensure's answer waits for the VMM's boot to end. Well inside the 5 s a placement
 * gives its call (activities/host-agent-calls.ts PLACED_BOOT_TIMEOUT_MS), devices and spawn
 * included; Cloud Hypervisor's vm.create and vm.boot take milliseconds.
 */
const BOOT_ANSWER_WAIT_MS = 2_000
const PURGE_INTERVAL_MS = 60 * 60 * 1000

export interface EnsureResult {
  view: VmmView
  created: boolean
}

export class Supervisor {
  readonly #vmms = new Map<string, VmmSupervisor>()
  readonly #ensuring = new Map<string, Promise<unknown>>()
  /** Receiver URLs chosen for targets whose records are being written: no other target takes them. */
  readonly #receiversBeingRecorded = new Set<string>()
  #purgeTimer: NodeJS.Timeout | null = null

  constructor (private readonly context: VmmContext) {}

  get log (): Logger {
    return this.context.log
  }

  get devices (): VmmDevices {
    return this.context.devices
  }

  all (): VmmSupervisor[] {
    return [...this.#vmms.values()]
  }

  list (): VmmView[] {
    return this.all().map((vmm) => vmm.view())
  }

  async get (id: string): Promise<VmmSupervisor> {
    await this.#ensuring.get(id)?.catch(() => {})
    const vmm = this.#vmms.get(id)
    if (vmm === undefined) throw notFound('vmm', `no VMM ${id} on this host`)
    return vmm
  }

  async ensure (id: string, request: EnsureVmmRequest): Promise<EnsureResult> {
    await this.#ensuring.get(id)?.catch(() => {})
    const existing = this.#vmms.get(id)
    if (existing !== undefined) {
      const vmm = this.#checkSame(existing, request)
      // A retry made later may carry newer rules than the first ask did.
      if (request.policy !== undefined && await vmm.takePolicy(request.policy)) await this.context.devices.applyPolicies()
      await vmm.awaitBoot(BOOT_ANSWER_WAIT_MS)
      return { view: vmm.view(), created: false }
    }
    const creating = this.#create(id, request)
    this.#ensuring.set(id, creating)
    let vmm: VmmSupervisor
    try {
      vmm = await creating
    } finally {
      this.#ensuring.delete(id)
    }
    await vmm.awaitBoot(BOOT_ANSWER_WAIT_MS)
    return { view: vmm.view(), created: true }
  }

  async pressPowerButton (id: string, deadline: Date | null): Promise<VmmView> {
    const vmm = await this.get(id)
    await vmm.pressPowerButton(deadline)
    return vmm.view()
  }

  /**
   * Takes the VMM's firewall policy if it is newer than the one it has (`generation`), and brings
   * the host's networks to it; returns the generation the VMM now has.
   */
  async setPolicy (id: string, policy: VmmPolicy): Promise<{ generation: number }> {
    const vmm = await this.get(id)
    if (await vmm.takePolicy(policy)) await this.context.devices.applyPolicies()
    return { generation: vmm.record.policy?.generation ?? 0 }
  }

  async reboot (id: string): Promise<VmmView> {
    const vmm = await this.get(id)
    await vmm.reboot()
    return vmm.view()
  }

  /** Sends the VMM's VM to a migration's target (idempotent on the migration). */
  async sendMigration (id: string, request: SendMigrationRequest): Promise<VmmView> {
    const vmm = await this.get(id)
    await vmm.migration.send(request)
    return vmm.view()
  }

  /**
   * Kills a migration's target unless it has finished receiving. An ID this agent has no record
   * of is fenced, as by a delete: a target whose ensure the cancel overtook is never started.
   */
  async cancelMigration (id: string, request: MigrationOfCall): Promise<VmmView> {
    const vmm = await this.#getOrFence(id)
    await vmm.migration.cancel(request.migrationId)
    return vmm.view()
  }

  /** Resumes a migration's source that its agent held paused, once the control plane knows the target does not have the VM. */
  async resumeHeldSource (id: string, request: MigrationOfCall): Promise<VmmView> {
    const vmm = await this.get(id)
    await vmm.migration.resumeHeld(request.migrationId)
    return vmm.view()
  }

  /**
   * Kills and cleans up the VMM. An ID this agent has no record of is fenced before the 404, so
   * an ensure of it that arrives later (a retry that a delete overtook) can never create it.
   */
  async destroy (id: string): Promise<VmmView> {
    const vmm = await this.#getOrFence(id)
    await vmm.destroy()
    return vmm.view()
  }

  /** Kills every live VMM of the host: its lease lapsed (host-agent/lease/lease-keeper.ts). */
  async fenceAll (reason: string): Promise<void> {
    await Promise.all(this.all().filter((vmm) => !vmm.terminal).map(async (vmm) => { await vmm.fence(reason) }))
  }

  async #getOrFence (id: string): Promise<VmmSupervisor> {
    await this.#ensuring.get(id)?.catch(() => {})
    const vmm = this.#vmms.get(id)
    if (vmm === undefined) {
      await this.context.store.fence(id)
      throw notFound('vmm', `no VMM ${id} on this host; the ID is fenced and will never be created`)
    }
    return vmm
  }

  /** The live VMM whose spec has the TAP, by TAP name. */
  tapOwners (): Map<string, string> {
    const owners = new Map<string, string>()
    for (const vmm of this.all()) {
      if (vmm.terminal) continue
      for (const nic of vmm.record.spec.interfaces ?? []) owners.set(tapNameOf(nic.id), vmm.id)
    }
    return owners
  }

  /** Every vmplane TAP on the host, with the live VMM whose it is. */
  async taps (): Promise<TapView[]> {
    const owners = this.tapOwners()
    return (await this.context.devices.taps.list()).map((tap) => ({ ...tap, vmmId: owners.get(tap.name) ?? null }))
  }

  /**
   * Removes a TAP no live VMM has (409 if one has); false when there was none. Ownership is
   * checked again once no other change of that TAP is in flight, so a VMM that takes the name
   * meanwhile keeps its TAP.
   */
  async removeTap (name: string): Promise<boolean> {
    const owner = this.tapOwners().get(name)
    if (owner !== undefined) throw conflict(`TAP ${name} belongs to the live VMM ${owner}`)
    return await this.context.devices.taps.remove(name, () => this.tapOwners().has(name))
  }

  /** Removes a disk no live VMM on this host uses (409 if one does); false when there was none. */
  async removeDisk (diskId: string): Promise<boolean> {
    const user = this.all().find((vmm) => !vmm.terminal && (vmm.record.spec.disks ?? []).some((disk) => disk.id === diskId))
    if (user !== undefined) throw conflict(`disk ${diskId} is in use by the live VMM ${user.id}`)
    return await this.context.devices.storage.removeDisk(diskId)
  }

  /** Removes an instance's seed unless a live VMM on this host uses it (409). */
  async removeSeed (instanceId: string): Promise<boolean> {
    const user = this.all().find((vmm) => !vmm.terminal && vmm.record.instanceId === instanceId && vmm.record.spec.cloudInit !== undefined)
    if (user !== undefined) throw conflict(`the seed of instance ${instanceId} is in use by the live VMM ${user.id}`)
    return await this.context.devices.storage.removeSeed(instanceId)
  }

  /** VMM processes under this agent's directory that no live record owns (none, normally). */
  async strays (): Promise<StrayView[]> {
    const running = await findVmmProcesses(this.context.store.vmmsDir)
    for (const vmm of this.all()) if (!vmm.terminal) running.delete(vmm.paths.apiSocket)
    return [...running.entries()].map(([apiSocket, p]) => ({
      pid: p.pid,
      startTime: p.startTime,
      apiSocket,
      startedAt: startedAt(p.startTime).toISOString()
    }))
  }

  /** Kills a stray (named by PID and start time) and waits for it; false if it is none. */
  async reapStray (pid: number, startTime: string): Promise<boolean> {
    const stray = (await this.strays()).find((s) => s.pid === pid && s.startTime === startTime)
    if (stray === undefined) return false
    this.#killStrays([{ pid, startTime, argv: ['--api-socket', stray.apiSocket] }])
    const deadline = Date.now() + this.context.settings.killWaitMs
    while (isRunning({ pid, startTime })) {
      if (Date.now() >= deadline) throw unavailable(`stray VMM process ${pid} has not exited yet after SIGKILL; retry`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return true
  }

  /** Loads every record, adopts or concludes each VMM, and kills strays (see the module comment). */
  async start (): Promise<void> {
    const { store, log } = this.context
    await store.init()
    const running = await findVmmProcesses(store.vmmsDir)
    const { records, unreadable } = await store.loadAll()
    for (const { id, problem } of unreadable) {
      // A record exists but cannot be read: nobody can say what this VMM is, so its process is
      // left alone (not killed as a stray) for an operator to look at.
      running.delete(vmmPaths(store.dirOf(id)).apiSocket)
      log.error({ vmmId: id, problem }, 'VMM record cannot be read; its process is left untouched')
    }
    for (const record of records) {
      const vmm = new VmmSupervisor(this.context, record)
      this.#vmms.set(record.id, vmm)
      const found = running.get(vmm.paths.apiSocket)
      running.delete(vmm.paths.apiSocket)
      if (!vmm.terminal) await this.#takeOver(vmm, found === undefined ? null : found)
    }
    this.#killStrays(running.values())
    await this.purgeTombstones()
    this.#purgeTimer = setInterval(() => {
      this.purgeTombstones().catch((err: Error) => { log.error({ err: err.message }, 'tombstone purge failed') })
    }, PURGE_INTERVAL_MS)
    this.#purgeTimer.unref()
    log.info({ vmms: records.length, live: this.all().filter((vmm) => !vmm.terminal).length }, 'VMM records loaded')
  }

  #killStrays (strays: Iterable<RunningProcess>): void {
    const killed = killVmmProcesses(strays, 'a VMM process that no record owns', this.log)
    for (let i = 0; i < killed; i++) this.context.onKill('stray')
  }

  /** Removes terminal records whose last report was accepted more than a day ago, and old fences. */
  async purgeTombstones (now = Date.now()): Promise<void> {
    await this.context.store.purgeFences(now - TOMBSTONE_TTL_MS)
    for (const vmm of this.all()) {
      const { record } = vmm
      const expired = Date.parse(record.updatedAt) + TOMBSTONE_TTL_MS < now
      if (!vmm.terminal || !expired || record.reportedGeneration < record.generation) continue
      this.#vmms.delete(record.id)
      await this.context.store.remove(record.id)
      vmm.log.info('removed the tombstone of a VMM that ended more than a day ago')
    }
  }

  /** Stops watching every VMM; their processes keep running. */
  release (): void {
    if (this.#purgeTimer !== null) clearInterval(this.#purgeTimer)
    for (const vmm of this.all()) vmm.release()
  }

  async #takeOver (vmm: VmmSupervisor, found: { pid: number, startTime: string } | null): Promise<void> {
    const { record } = vmm
    const recorded = record.pid !== null && record.pidStartTime !== null
      ? { pid: record.pid, startTime: record.pidStartTime }
      : null
    const identity = recorded !== null && isRunning(recorded) ? recorded : found
    if (identity !== null) {
      await vmm.adopt(identity)
    } else if (record.state === 'starting' && !record.destroyRequested && record.stopDeadline === null && record.pendingKill === null &&
      (record.incoming === null || record.pid === null)) {
      vmm.log.info('VMM process of a starting VMM is gone; spawning it again')
      await vmm.spawn()
    } else {
      await vmm.concludeVanished()
    }
  }

  async #create (id: string, request: EnsureVmmRequest): Promise<VmmSupervisor> {
    const { store, devices } = this.context
    if (await store.isFenced(id)) throw conflict(`VMM ${id} was destroyed before it was created; a VMM ID is never used again`)
    const refusal = this.context.refusesNewVmms()
    if (refusal !== null) throw unavailable(refusal)
    const { incoming } = request
    await devices.check(request.spec, incoming !== undefined)
    const now = new Date().toISOString()
    const receiverUrl = incoming === undefined ? null : this.context.transport.receiverUrl(incoming.migrationId, this.#takenReceiverUrls())
    if (receiverUrl !== null) this.#receiversBeingRecorded.add(receiverUrl)
    try {
      return await this.#record(id, request, now, receiverUrl)
    } finally {
      if (receiverUrl !== null) this.#receiversBeingRecorded.delete(receiverUrl)
    }
  }

  async #record (id: string, request: EnsureVmmRequest, now: string, receiverUrl: string | null): Promise<VmmSupervisor> {
    const { store } = this.context
    const { incoming } = request
    const record: AgentVmmRecord = {
      id,
      instanceId: request.instanceId,
      instanceName: request.instanceName,
      spec: request.spec,
      state: 'starting',
      generation: 1,
      reportedGeneration: 0,
      pid: null,
      pidStartTime: null,
      createdAt: now,
      updatedAt: now,
      reason: incoming === undefined ? 'VMM requested' : `VMM requested as the target of migration ${incoming.migrationId}`,
      exit: null,
      stopDeadline: null,
      unresponsiveSince: null,
      destroyRequested: false,
      pendingKill: null,
      migration: incoming === undefined
        ? null
        : { id: incoming.migrationId, role: 'target', phase: 'preparing', receiverUrl, iterations: 0, progressAt: now, reason: null },
      incoming: incoming ?? null,
      outgoing: null,
      policy: request.policy ?? null
    }
    try {
      await store.createDir(id)
      await store.save(record)
    } catch (err) {
      // No record, no process (I3): the caller may retry once the disk is fixed.
      throw unavailable(`cannot record VMM ${id}: ${(err as Error).message}`)
    }
    crashPoint('agent.ensure.after-record')
    const vmm = new VmmSupervisor(this.context, record)
    this.#vmms.set(id, vmm)
    // No report of generation 1: the answer to this ensure carries it to the caller, the VMM's
    // own execution. The outbox hears of the VMM at its next change, or at an agent restart.
    vmm.log.info({ instanceName: request.instanceName, incoming, receiverUrl }, 'VMM recorded; starting its process')
    await vmm.spawn()
    return vmm
  }

  /**
   * The receiver URLs of targets still receiving (a finished one listens no more), and of those
   * being recorded.
   */
  #takenReceiverUrls (): Set<string> {
    const taken = new Set(this.#receiversBeingRecorded)
    for (const vmm of this.all()) {
      const url = vmm.record.migration?.receiverUrl ?? null
      if (vmm.migration.receiving && url !== null) taken.add(url)
    }
    return taken
  }

  #checkSame (vmm: VmmSupervisor, request: EnsureVmmRequest): VmmSupervisor {
    const { record } = vmm
    if (record.instanceId !== request.instanceId) {
      throw conflict(`VMM ${record.id} belongs to instance ${record.instanceId}, not ${request.instanceId}`)
    }
    if (record.state === 'destroyed') {
      throw conflict(`VMM ${record.id} was destroyed; a VMM ID is never used again`)
    }
    if (!isDeepStrictEqual(normalise(record.spec), normalise(request.spec))) {
      throw conflict(`VMM ${record.id} exists with a different spec`)
    }
    if (record.incoming?.migrationId !== request.incoming?.migrationId) {
      throw conflict(`VMM ${record.id} exists ${record.incoming === null ? 'to boot its VM' : `as the target of migration ${record.incoming.migrationId}`}, not as asked`)
    }
    return vmm
  }
}

/** Specs compare as their JSON: an absent optional field equals an undefined one. */
function normalise (value: unknown): unknown {
  return JSON.parse(JSON.stringify(value))
}
