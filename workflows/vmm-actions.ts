/**
 * What operations do to one VMM through its host's agent, shared by start, reboot, migrate and halt.
 */
import { ActivityFailure, ApplicationFailure, CancellationScope, log, patched } from '@temporalio/workflow'
import { concludedReport, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { agents } from './activity-proxies.js'
import type { InstanceContext } from './instance-context.js'
import { REFUSED_DESCRIBE_IS_NO_NEWS_PATCH } from './patches.js'

/**
 * Kills the VMM if it lives, waits for its process to exit and cleans up after it: the kill
 * branch every stop and fence ends in. Retried until the agent answers, however long its host
 * stays unreachable (I2), unless the VMM ends meanwhile by other means: a report of its exit, or
 * its host declared lost by an operator. An agent that affirms it has no such VMM is a positive
 * signal that it is gone.
 */
export async function destroyOnHost (execution: InstanceContext, vmm: VmmRecord): Promise<void> {
  if (execution.isGone(vmm.id)) return
  let answer: { report: VmmReport | null } | null = null
  let failure: unknown = null
  const call = new CancellationScope()
  call.run(() => agents.destroyVmm({ hostId: vmm.hostId, vmmId: vmm.id })).then(
    (report) => { answer = { report } },
    (err: unknown) => { failure = err }
  )
  await execution.waitFor(() => answer !== null || failure !== null || execution.isGone(vmm.id))
  call.cancel()
  const settled = answer as { report: VmmReport | null } | null
  if (settled !== null) {
    const known = execution.vmm(vmm.id) ?? vmm
    execution.observe(settled.report ?? concludedReport(known, 'destroyed', 'the host agent has no record of this VMM', new Date().toISOString()))
  } else if (!execution.isGone(vmm.id)) {
    throw failure
  }
}

/**
 * Asks the VMM's agent how the VMM is, and takes the answer in like a report. An agent that
 * refuses to say (an answer, not an outage: outages are retried) has said nothing: the caller
 * goes on as if it had not asked, where the refusal escaped the operation and failed the whole
 * execution (issue 25).
 */
export async function describeOnHost (execution: InstanceContext, vmm: { hostId: string, vmmId: string }): Promise<void> {
  try {
    execution.observe(await agents.describeVmm(vmm))
  } catch (err) {
    if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && patched(REFUSED_DESCRIBE_IS_NO_NEWS_PATCH))) throw err
    log.warn('the agent refused to describe the VMM; going on without its answer', { ...vmm, error: err.cause.message })
  }
}
