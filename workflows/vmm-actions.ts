/**
 * What operations do to one VMM through its host's agent, shared by start, reboot and halt.
 */
import { CancellationScope } from '@temporalio/workflow'
import { concludedReport, type VmmRecord, type VmmReport } from '../domain/vmm.js'
import { agents } from './activities.js'
import type { InstanceExecution } from './execution.js'

/**
 * Kills the VMM if it lives, waits for its process to exit and cleans up after it: the kill
 * branch every stop and fence ends in. Retried until the agent answers, however long its host
 * stays unreachable (I2), unless the VMM ends meanwhile by other means: a report of its exit, or
 * its host declared lost by an operator. An agent that affirms it has no such VMM is a positive
 * signal that it is gone.
 */
export async function destroyOnHost (execution: InstanceExecution, vmm: VmmRecord): Promise<void> {
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
