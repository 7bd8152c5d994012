/**
 * Start: fence, place, create on the host, wait for `running`.
 *
 * 1. Fence (I6): every earlier VMM of the instance that is not confirmed gone is destroyed
 *    first, so an instance never has two live VMMs.
 * 2. Place: the new VMM's ID (chosen deterministically before the fence, so a replay or a
 *    retried task picks the same one) is recorded with its host and reservation before
 *    anything happens on the host (I3).
 * 3. Ensure the VMM on its host: idempotent on the VMM ID, retried on the same host until the
 *    agent answers.
 * 4. Wait for the VMM to report `running`, at most the boot timeout from placement; at the
 *    deadline, ask its agent before giving up. A VMM that never gets there is killed and the
 *    instance is left `stopped` with the reason; the operation fails, and a new start may
 *    proceed at once.
 */
import { ActivityFailure, ApplicationFailure, CancellationScope, patched, uuid4 } from '@temporalio/workflow'
import { PATCHES, type CreateRequest, type RebootRequest, type StartRequest } from './definitions.js'
import { agents } from './activities.js'
import type { InstanceExecution, OperationBody } from './execution.js'
import { destroyOnHost, isGone, isRunning } from './vmm-actions.js'

export const start: OperationBody<StartRequest> = async (x, request) => {
  const active = x.activeVmm()
  if (x.instance.state === 'running' && active?.state === 'running') {
    await x.change({ kind: 'operation-finished', message: 'start: instance is already running', operation: { request, status: 'succeeded' } })
    return
  }
  await x.change({
    kind: 'operation-started',
    message: request.automaticAttempt === undefined
      ? 'start requested'
      : `restarting by itself (restart policy on-failure, attempt ${request.automaticAttempt})`,
    set: { state: 'starting', intendedState: 'running', restartAt: null },
    operation: { request, status: 'running' }
  })
  await bootNewVmm(x, request)
}

interface StartFailure {
  code: string
  message: string
}

/** Steps 1–4 above, recording the operation's outcome; used by start, create and reboot. */
export async function bootNewVmm (x: InstanceExecution, request: StartRequest | CreateRequest | RebootRequest): Promise<void> {
  // The new VMM's ID is chosen before the fence: a worker that died right after the placement
  // committed leaves the placed VMM live in PostgreSQL, and the retried task, which picks the
  // same ID, must not fence it as an older one (found by the fault matrix). Executions that
  // began without this patch chose the ID after the fence and replay that way.
  const chosenFirst = patched(PATCHES.vmmIdBeforeFence) ? uuid4() : null
  x.phase = 'fencing'
  for (const older of x.liveVmms()) if (older.id !== chosenFirst) await destroyOnHost(x, older)

  x.phase = 'placing'
  const vmmId = chosenFirst ?? uuid4()
  const placement = await x.place(vmmId, { kind: 'vmm-placed', message: `placed VMM ${vmmId}` })
  if ('reason' in placement) {
    await failStart(x, request, { code: 'NoCapacity', message: placement.reason })
    return
  }

  x.phase = 'booting'
  const failure = await bootOnHost(x, placement.hostId, vmmId)
  if (failure !== null) {
    await failStart(x, request, failure)
    return
  }
  x.phase = 'running'
  await x.change({
    kind: 'operation-finished',
    message: `running on ${placement.hostId}`,
    vmmId,
    set: { state: 'running', lastError: null, restartAt: null },
    operation: { request, status: 'succeeded' }
  })
}

async function bootOnHost (x: InstanceExecution, hostId: string, vmmId: string): Promise<StartFailure | null> {
  const bootDeadline = Date.now() + x.settings.bootTimeoutMs
  let refused: StartFailure | null = null
  const ensure = CancellationScope.cancellable(async () => {
    const { id: instanceId, name: instanceName, vcpus, memoryMiB, boot } = x.instance
    await x.observe(await agents.ensureVmm({ hostId, vmmId, instanceId, instanceName, spec: { vcpus, memoryMiB, boot } }))
  })
  ensure.catch((err: unknown) => {
    refused = { code: 'HostRefused', message: describeFailure(err) }
  })
  const settled = await x.conditionWithReports(
    () => isRunning(x, vmmId) || isGone(x, vmmId) || refused !== null,
    Math.max(0, bootDeadline - Date.now())
  )
  if (isRunning(x, vmmId)) return null
  // No report by the deadline is not a report that the VM failed to boot (I2): a stalled
  // Temporal server can hold a running VM's report past it (found by the 4,000-instance
  // campaign). The agent is asked first, and the VM killed only if it still does not run.
  if (!settled && refused === null && patched(PATCHES.askBeforeBootTimeout)) {
    await x.observe(await agents.describeVmm({ hostId, vmmId }))
    if (isRunning(x, vmmId)) return null
  }

  const vmm = x.vmm(vmmId)
  const why: StartFailure = refused ?? (settled && vmm !== null
    ? { code: vmm.state === 'lost' ? 'HostLost' : 'BootFailed', message: vmm.reason ?? 'the VMM ended before it was running' }
    : { code: 'BootTimeout', message: `the VM did not reach running within ${x.settings.bootTimeoutMs / 1000} s; VMM killed` })
  if (vmm !== null) await destroyOnHost(x, vmm)
  return why
}

async function failStart (x: InstanceExecution, request: StartRequest | CreateRequest | RebootRequest, failure: StartFailure): Promise<void> {
  x.phase = 'failed'
  await x.change({
    kind: 'operation-finished',
    message: `${request.kind} failed: ${failure.message}`,
    set: { state: 'stopped', lastError: failure },
    operation: { request, status: 'failed', error: failure }
  })
}

function describeFailure (err: unknown): string {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause.message
  return err instanceof Error ? err.message : String(err)
}
