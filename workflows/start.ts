/**
 * Start: place, fence, create on the host, wait for `running`.
 *
 * 1. Place: the new VMM's ID (named by the operation, activities/vmm-records.ts), its host and
 *    its reservation are recorded, and it becomes the instance's active VMM, before anything
 *    happens on a host (I3). A retry, a replay or a reset finds the VMM the operation placed.
 *    While no host has room, the instance stays `starting` with the `NoCapacity` condition and
 *    placement is tried again on a durable timer, backing off, until the placement timeout; then
 *    the start fails with `NoCapacity` (as KubeVirt keeps a VM pending while it is
 *    unschedulable).
 * 2. Fence (I6): every other VMM of the instance that is not confirmed gone is destroyed before
 *    the new one is created, so an instance never has two live VMMs.
 * 3. Ensure the VMM on its host: idempotent on the VMM ID, retried on the same host until the
 *    agent answers. The agent makes the instance's disks, seed and TAPs first, each keyed by its
 *    ID, so a retry or another host finds them. When step 2 has nothing to fence (a create, a
 *    start of a stopped instance), the placement itself asks the agent once, right after its
 *    transaction commits (patch `place-and-boot`): on a healthy host a boot is then one activity
 *    where it was two. The placement is a write, which no halt cancels, so it asks within a few
 *    seconds only; an agent that did not answer by then is asked again here, through the
 *    cancellable `ensureVmm`, as before. Such a placement carries the boot's end too, decided
 *    with it: when the agent answers that the VM runs, the placement's activity records the
 *    operation's success, and the boot is over; otherwise the boot goes on through step 4.
 * 4. Wait for the VMM to report `running`, at most the boot timeout; at the deadline, ask its
 *    agent before giving up (no report is not a report of failure, I2). A VMM that never gets
 *    there is killed and the instance is left `stopped` with the reason; the operation fails,
 *    and a new start may proceed at once.
 */
import { ActivityFailure, ApplicationFailure, CancellationScope, patched, sleep } from '@temporalio/workflow'
import { decisionKeys } from '../domain/decisions.js'
import { vmmSpecOf } from '../domain/instance.js'
import type { BootRequest, StartRequest } from '../domain/requests.js'
import type { VmmReport } from '../domain/vmm.js'
import { agents } from './activity-proxies.js'
import type { ChangeInput, InstanceContext, Placement, PlacementOptions } from './instance-context.js'
import { PLACE_AND_BOOT_PATCH } from './patches.js'
import { describeOnHost, destroyOnHost } from './vmm-actions.js'

export async function start (execution: InstanceContext, request: StartRequest): Promise<void> {
  const active = execution.activeVmm()
  if (execution.instance.state === 'running' && active?.state === 'running') {
    await execution.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message: 'start: instance is already running',
      operation: { request, status: 'succeeded' }
    })
    return
  }
  await bootNewVmm(execution, request, {
    decision: decisionKeys.started(request.operationId),
    kind: 'operation-started',
    message: request.automaticAttempt === undefined
      ? 'start requested'
      : `restarting by itself (attempt ${request.automaticAttempt})`,
    set: { state: 'starting', intendedState: 'running', restartAt: null },
    operation: { request, status: 'running' }
  })
}

interface BootFailure {
  code: string
  message: string
}

/**
 * Steps 1–4 above, recording the operation's outcome; used by start, create and reboot.
 * `began`, the operation's start, is recorded with the placement.
 */
export async function bootNewVmm (execution: InstanceContext, request: BootRequest, began?: ChangeInput): Promise<void> {
  // Decided before the placement: with a VMM to fence, the agent is asked only once it is gone.
  const boot = execution.liveVmms().length === 0 && patched(PLACE_AND_BOOT_PATCH)
    ? { instanceName: execution.instance.name, spec: vmmSpecOf(execution.instance) }
    : undefined
  // No patch: whether the placement recorded the finish is in its recorded result, which lacks
  // `finished` in executions recorded before, so they replay the path they ran.
  const finish = boot === undefined ? undefined : bootSucceeded(request)
  const placement = await place(execution, request, { before: began, boot, finish })
  if ('reason' in placement) {
    await failBoot(execution, request, { code: placement.code, message: placement.reason })
    return
  }
  if (placement.finished) {
    execution.enterPhase('running')
    return
  }
  execution.enterPhase('fencing')
  for (const older of execution.liveVmms()) if (older.id !== placement.vmmId) await destroyOnHost(execution, older)

  execution.enterPhase('booting', `VMM ${placement.vmmId} on ${placement.hostId}`)
  const failure = await bootOnHost(execution, placement.hostId, placement.vmmId, placement.booted)
  if (failure !== null) {
    await failBoot(execution, request, failure)
    return
  }
  execution.enterPhase('running')
  await execution.change(bootSucceeded(request, placement))
}

/** The change that ends a boot that succeeded; a placement that records it names the VMM and host. */
function bootSucceeded (request: BootRequest, placed?: { vmmId: string, hostId: string }): ChangeInput {
  return {
    decision: decisionKeys.finished(request.operationId),
    kind: 'operation-finished',
    message: placed === undefined ? 'running' : `running on ${placed.hostId}`,
    vmmId: placed?.vmmId,
    set: { state: 'running', lastError: null, restartAt: null },
    operation: { request, status: 'succeeded' }
  }
}

/** The first wait for room, and the longest; doubling in between. */
const FIRST_PLACEMENT_RETRY_MS = 1000
const MAX_PLACEMENT_RETRY_MS = 30_000

/** Step 1: places the VMM, waiting for room up to the placement timeout; `before` goes with the first try. */
async function place (execution: InstanceContext, request: BootRequest, { before, boot, finish }: PlacementOptions): Promise<Placement> {
  execution.enterPhase('placing')
  const giveUpAt = Date.now() + execution.settings.placementTimeoutMs
  let placement = await execution.placeVmm(request, { before, boot, finish })
  for (let delay = FIRST_PLACEMENT_RETRY_MS; 'reason' in placement && placement.code === 'NoCapacity' && Date.now() < giveUpAt; delay = Math.min(2 * delay, MAX_PLACEMENT_RETRY_MS)) {
    if (delay === FIRST_PLACEMENT_RETRY_MS) {
      await execution.change({
        decision: decisionKeys.waitingForCapacity(request.operationId),
        kind: 'condition-changed',
        message: `waiting for a host with room: ${placement.reason}`,
        set: { lastError: { code: 'NoCapacity', message: placement.reason } }
      })
    }
    execution.enterPhase('placing', `no host has room; trying again in ${delay / 1000} s, until ${new Date(giveUpAt).toISOString()}`)
    await sleep(Math.min(delay, Math.max(1, giveUpAt - Date.now())))
    placement = await execution.placeVmm(request, { boot, finish })
  }
  return placement
}

/** Steps 3 and 4; `booted`, the agent's answer to the placement's boot, when it gave one. */
async function bootOnHost (execution: InstanceContext, hostId: string, vmmId: string, booted: VmmReport | null): Promise<BootFailure | null> {
  let refused: BootFailure | null = null
  if (booted !== null) {
    execution.observe(booted)
  } else {
    const ensure = CancellationScope.cancellable(async () => {
      const { id: instanceId, name: instanceName } = execution.instance
      execution.observe(await agents.ensureVmm({ hostId, vmmId, instanceId, instanceName, spec: vmmSpecOf(execution.instance) }))
    })
    ensure.catch((err: unknown) => {
      refused = { code: 'HostRefused', message: describeFailure(err) }
    })
  }
  const settled = await execution.waitFor(
    () => execution.isRunning(vmmId) || execution.isGone(vmmId) || refused !== null,
    execution.settings.bootTimeoutMs
  )
  if (execution.isRunning(vmmId)) return null
  // No report by the deadline is not a report that the VM failed to boot (I2): a stalled
  // Temporal server can hold a running VM's report past it. The agent is asked first, and the VM
  // killed only if it still does not run.
  if (!settled && refused === null) {
    await describeOnHost(execution, { hostId, vmmId })
    if (execution.isRunning(vmmId)) return null
  }

  const vmm = execution.vmm(vmmId)
  const why: BootFailure = refused ?? (execution.isGone(vmmId) && vmm !== null
    ? { code: vmm.state === 'lost' ? 'HostLost' : 'BootFailed', message: vmm.reason ?? 'the VMM ended before it was running' }
    : { code: 'BootTimeout', message: `the VM did not reach running within ${execution.settings.bootTimeoutMs / 1000} s; VMM killed` })
  if (vmm !== null) await destroyOnHost(execution, vmm)
  return why
}

async function failBoot (execution: InstanceContext, request: BootRequest, failure: BootFailure): Promise<void> {
  execution.enterPhase('failed', failure.code)
  await execution.change({
    decision: decisionKeys.finished(request.operationId),
    kind: 'operation-finished',
    message: `${request.kind} failed: ${failure.message}`,
    set: { state: 'stopped', lastError: failure },
    operation: { request, status: 'failed', error: failure }
  })
}

export function describeFailure (err: unknown): string {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause.message
  return err instanceof Error ? err.message : String(err)
}
