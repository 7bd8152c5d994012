/**
 * Theory of operation: stop and delete (I1, stop always terminates).
 *
 * A halt serves every stop and delete the instance received until it ends: the earliest deadline
 * wins (a second stop with a shorter grace shortens the running one, never the reverse) and a
 * delete among them turns the whole halt into a delete.
 *
 * For each VMM of the instance that is not confirmed gone:
 * 1. Graceful: the agent is asked to press the ACPI power button, and is told the deadline. The
 *    agent presses again every few seconds and kills the VMM itself at the deadline, so the kill
 *    happens on time even if this worker or Temporal is down at that moment. A lowered deadline
 *    is sent again.
 * 2. Wait, on a durable timer, for the VMM to end. The agent kills at the deadline; this waits a
 *    short backstop longer for its report.
 * 3. The kill branch, always: the agent kills the VMM if it still lives, waits for the process
 *    to exit and cleans up. It is retried until the agent answers; while the host is unreachable
 *    the instance stays `stopping` (never `stopped` on a guess, I2).
 * Then the instance is recorded `stopped` (or destroyed), with whether the guest powered off or
 * had to be killed, and why.
 */
import { ActivityFailure, ApplicationFailure, CancellationScope, condition } from '@temporalio/workflow'
import type { VmmRecord } from '../domain/vmm.js'
import { agents } from './activities.js'
import type { InstanceExecution } from './execution.js'
import { destroyOnHost, isGone } from './vmm-actions.js'

export async function halt (x: InstanceExecution): Promise<void> {
  x.phase = 'stopping'
  const started = new Set<string>()
  await recordStarted(x, started)
  const vmms = x.liveVmms()
  await Promise.all(vmms.map((vmm) => stopVmm(x, vmm)))
  // Halts that arrived while this one ran are served by it too.
  await recordStarted(x, started)

  const deleting = x.haltKind() === 'delete'
  const ended = vmms.map((v) => x.vmm(v.id) ?? v)
  const forced = ended.some(wasKilled)
  const how = describeEnd(ended)
  x.phase = deleting ? 'destroyed' : 'stopped'
  await x.change({
    kind: 'state-changed',
    message: `${deleting ? 'destroyed' : 'stopped'}: ${how}`,
    details: { forced },
    set: deleting
      ? { state: 'destroyed', intendedState: 'destroyed', destroyed: true }
      : {
          state: 'stopped',
          intendedState: 'stopped',
          ...(forced ? { lastError: { code: 'StopForced', message: `stop ${how}` } } : {})
        }
  })
  for (const request of x.halts) {
    await x.change({ kind: 'operation-finished', message: `${request.kind} done`, operation: { request, status: 'succeeded' } })
  }
  x.halts.length = 0
  x.haltDeadline = null
}

function wasKilled (vmm: VmmRecord): boolean {
  return vmm.exit?.cause === 'killed' || vmm.exit?.cause === 'stop-deadline'
}

/** How the VMMs of a halt ended, for people: graceful, forced, or otherwise. */
function describeEnd (vmms: VmmRecord[]): string {
  if (vmms.length === 0) return 'no VMM was running'
  const forced = vmms.find(wasKilled)
  if (forced !== undefined) return `grace period expired; VMM killed (${forced.reason ?? forced.exit?.cause ?? 'killed'})`
  const other = vmms.find((v) => v.exit?.cause !== 'guest-poweroff')
  if (other !== undefined) return other.reason ?? 'VMM gone'
  return 'guest powered off'
}

async function recordStarted (x: InstanceExecution, started: Set<string>): Promise<void> {
  for (const request of x.halts) {
    if (started.has(request.operationId)) continue
    started.add(request.operationId)
    await x.change({
      kind: 'operation-started',
      message: `${request.kind} requested (grace ${request.graceSeconds} s)`,
      set: {
        ...(x.liveVmms().length > 0 ? { state: 'stopping' as const } : {}),
        intendedState: request.kind === 'delete' ? 'destroyed' : 'stopped'
      },
      operation: { request, status: 'running' }
    })
  }
}

async function stopVmm (x: InstanceExecution, vmm: VmmRecord): Promise<void> {
  const presses = new PowerButton(x, vmm)
  try {
    for (;;) {
      if (isGone(x, vmm.id) || x.haltDeadline === null) break
      const deadline = x.haltDeadline
      if (deadline > Date.now()) presses.sendDeadline(deadline)
      // The agent kills at a deadline it was told; give it a moment to report before we kill.
      const killAt = presses.sent === deadline ? deadline + x.settings.killBackstopMs : deadline
      if (Date.now() >= killAt) break
      await condition(() => isGone(x, vmm.id) || x.haltDeadline !== deadline || presses.refused, killAt - Date.now())
      if (presses.refused) break
    }
  } finally {
    presses.stop()
  }
  x.phase = 'killing'
  await destroyOnHost(x, x.vmm(vmm.id) ?? vmm)
}

/** The power-button calls of one stop: one in flight at a time, for the latest deadline. */
class PowerButton {
  sent: number | null = null
  /** The agent refused (no such VMM, or it cannot be stopped): go straight to the kill branch. */
  refused = false
  private scope: CancellationScope | null = null

  constructor (private readonly x: InstanceExecution, private readonly vmm: VmmRecord) {}

  sendDeadline (deadline: number): void {
    if (this.sent === deadline) return
    this.stop()
    this.sent = deadline
    const scope = new CancellationScope()
    this.scope = scope
    scope.run(async () => {
      const answer = await agents.pressPowerButton({ hostId: this.vmm.hostId, vmmId: this.vmm.id, deadline: new Date(deadline).toISOString() })
      await this.x.observe(answer)
    }).catch((err: unknown) => {
      if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) this.refused = true
    })
  }

  stop (): void {
    this.scope?.cancel()
    this.scope = null
  }
}
