/**
 * Theory of operation: stop and delete (I1, stop always terminates).
 *
 * A halt serves every stop and delete the instance received until it ends (halts.ts): the
 * earliest deadline wins and a delete among them turns the whole halt into a delete.
 *
 * For each VMM of the instance that is not confirmed gone:
 * 1. Graceful: the agent is asked to press the ACPI power button, and is told the deadline (as
 *    the time left: the activity reckons it on the control plane's clock, the agent sets it on
 *    its own). The agent presses again every few seconds and kills the VMM itself at the
 *    deadline, so the kill happens on time even if this worker or Temporal is down at that
 *    moment. A lowered deadline is sent again.
 * 2. Wait, on a durable timer, for the VMM to end. The agent kills at the deadline; this waits a
 *    short backstop longer for its report.
 * 3. The kill branch, always: the agent kills the VMM if it still lives, waits for the process
 *    to exit and cleans up. It is retried until the agent answers; while the host is unreachable
 *    the instance stays `stopping` (never `stopped` on a guess, I2).
 * A delete then removes the instance's disks and seed (through any active host's agent: they are
 * in the storage every host mounts). Then the instance is recorded `stopped` (or destroyed, which
 * frees its disks' space and its addresses), with whether the guest powered off or had to be
 * killed, and why; then each halt's operation is recorded succeeded.
 *
 * A halt can find its instance destroyed already: a stop or delete the API accepted as a delete
 * ended, which reached the execution after the delete's end was recorded or started a new one.
 * Nothing is left to stop, and nothing happens to the instance: each operation is recorded
 * succeeded, saying the instance was destroyed before it, and no change of state is recorded.
 */
import { ActivityFailure, ApplicationFailure, CancellationScope, log, patched } from '@temporalio/workflow'
import { decisionKeys } from '../domain/decisions.js'
import { haltEnd, nextStopStep } from '../domain/halt-decisions.js'
import type { HaltRequest } from '../domain/requests.js'
import type { VmmRecord } from '../domain/vmm.js'
import { agents } from './activity-proxies.js'
import type { InstanceContext } from './instance-context.js'
import { HALT_OF_DESTROYED_PATCH, INSTANCE_STORAGE_PATCH } from './patches.js'
import { destroyOnHost } from './vmm-actions.js'

/** `onWaiting`: called once the halt's operations are recorded started and it waits for the VMMs. */
export async function halt (execution: InstanceContext, onWaiting: () => void = () => {}): Promise<void> {
  if (execution.instance.destroyedAt !== null && patched(HALT_OF_DESTROYED_PATCH)) {
    await recordServed(execution, [...execution.halts.pending], 'done: the instance was already destroyed')
    return
  }
  const { halts } = execution
  const first = halts.pending[0]
  execution.enterPhase('stopping', stoppingDetail(execution))
  const started = new Set<string>()
  await recordStarted(execution, started)
  onWaiting()
  const vmms = execution.liveVmms()
  await Promise.all(vmms.map(async (vmm) => { await stopVmm(execution, vmm) }))
  // Halts that arrived while this one ran are served by it too.
  await recordStarted(execution, started)

  // The halts this end serves are those received by now. One that arrives while the end is
  // recorded is not served by it (a delete after a stop's end would be recorded done with the
  // instance stopped): it stays, and runs as a halt of its own.
  const served = [...halts.pending]
  const deleting = halts.kind() === 'delete'
  if (deleting && patched(INSTANCE_STORAGE_PATCH)) await releaseStorage(execution)
  const end = haltEnd(vmms.map((v) => execution.vmm(v.id) ?? v), { forcedBy: halts.forcedBy(), graceSeconds: halts.earliest().graceSeconds })
  execution.enterPhase(deleting ? 'destroyed' : 'stopped')
  await execution.change({
    decision: decisionKeys.halted(first.operationId),
    kind: 'state-changed',
    message: `${deleting ? 'destroyed' : 'stopped'}: ${end.message}`,
    details: { graceful: end.error === null, ...(end.error === null ? {} : { reason: end.error.code }) },
    set: deleting
      ? { state: 'destroyed', intendedState: 'destroyed', destroyed: true }
      : { state: 'stopped', intendedState: 'stopped', restartAt: null, ...(end.error === null ? {} : { lastError: end.error }) }
  })
  await recordServed(execution, served, 'done')
}

/** Records each halt `served` succeeded, its message `<kind> <done>`, and takes it off the book. */
async function recordServed (execution: InstanceContext, served: HaltRequest[], done: string): Promise<void> {
  for (const request of served) {
    await execution.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message: `${request.kind} ${done}`,
      operation: { request, status: 'succeeded' }
    })
  }
  execution.halts.remove(served)
}

/**
 * The disks and seed of an instance being deleted go once its VMMs are gone, before its end is
 * recorded (which frees their space, addresses and MACs). The agent refusing is logged and left
 * to the reconciler, which reaps storage no live record owns; it never keeps a delete from ending.
 */
async function releaseStorage (execution: InstanceContext): Promise<void> {
  execution.enterPhase('releasing storage')
  try {
    const outcome = await agents.releaseInstanceStorage({ instanceId: execution.instance.id })
    if (outcome === 'deferred') log.warn('no host is active to remove the instance\'s disks; the reconciler reaps them later', { instanceId: execution.instance.id })
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err
    log.warn('the agent refused to remove the instance\'s disks; the reconciler reaps them later', { instanceId: execution.instance.id, error: err.message })
  }
}

function stoppingDetail (execution: InstanceContext): string {
  const deadline = execution.halts.deadline
  return deadline === null ? 'no deadline' : `VMM killed at ${new Date(deadline).toISOString()} unless the guest powers off first`
}

async function recordStarted (execution: InstanceContext, started: Set<string>): Promise<void> {
  for (const request of execution.halts.pending) {
    if (started.has(request.operationId)) continue
    started.add(request.operationId)
    await execution.change({
      decision: decisionKeys.started(request.operationId),
      kind: 'operation-started',
      message: request.kind === 'stop' && request.forcedBy !== undefined
        ? `force-stop by ${request.forcedBy}: VMM killed without waiting for the guest`
        : `${request.kind} requested (grace ${request.graceSeconds} s)`,
      set: {
        ...(execution.liveVmms().length > 0 ? { state: 'stopping' as const } : {}),
        intendedState: request.kind === 'delete' ? 'destroyed' : 'stopped'
      },
      operation: { request, status: 'running' }
    })
  }
}

async function stopVmm (execution: InstanceContext, vmm: VmmRecord): Promise<void> {
  const presses = new PowerButton(execution, vmm)
  try {
    while (!execution.isGone(vmm.id)) {
      const deadline = execution.halts.deadline
      const step = nextStopStep({ now: Date.now(), deadline, toldAgent: presses.sent, killBackstopMs: execution.settings.killBackstopMs })
      if (step.kill) break
      if (step.tellAgent !== null) presses.sendDeadline(step.tellAgent)
      await execution.waitFor(() => execution.isGone(vmm.id) || execution.halts.deadline !== deadline || presses.refused, step.killAt - Date.now())
      if (presses.refused) break
    }
  } finally {
    presses.stop()
  }
  execution.enterPhase('killing', `VMM ${vmm.id} on ${vmm.hostId}`)
  await destroyOnHost(execution, execution.vmm(vmm.id) ?? vmm)
}

/** The power-button calls of one stop: one in flight at a time, for the latest deadline. */
class PowerButton {
  sent: number | null = null
  /** The agent refused (no such VMM, or it cannot be stopped): go straight to the kill branch. */
  refused = false
  private scope: CancellationScope | null = null

  constructor (private readonly execution: InstanceContext, private readonly vmm: VmmRecord) {}

  sendDeadline (deadline: number): void {
    if (this.sent === deadline) return
    this.stop()
    this.sent = deadline
    const scope = new CancellationScope()
    this.scope = scope
    scope.run(async () => {
      const answer = await agents.pressPowerButton({ hostId: this.vmm.hostId, vmmId: this.vmm.id, deadline: new Date(deadline).toISOString() })
      this.execution.observe(answer)
    }).catch((err: unknown) => {
      if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) this.refused = true
    })
  }

  stop (): void {
    this.scope?.cancel()
    this.scope = null
  }
}
