/**
 * Reboot: `vm.reboot` inside the same VMM process. If the VM is not running again within the
 * boot timeout (and its agent, asked at the deadline, does not say it is), or the VMM dies on
 * the way, the VMM is killed and the instance starts on a fresh VMM (with placement and
 * fencing, like any start).
 */
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow'
import { decisionKeys } from '../domain/decisions.js'
import type { RebootRequest } from '../domain/requests.js'
import { agents } from './activity-proxies.js'
import type { InstanceContext } from './instance-context.js'
import { bootNewVmm } from './start.js'
import { describeOnHost, destroyOnHost } from './vmm-actions.js'

export async function reboot (execution: InstanceContext, request: RebootRequest): Promise<void> {
  const vmm = execution.activeVmm()
  if (vmm === null || vmm.state !== 'running' || execution.instance.state !== 'running') {
    const message = `cannot reboot an instance that is ${execution.instance.state}`
    await execution.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message,
      operation: { request, status: 'failed', error: { code: 'Conflict', message } }
    })
    return
  }
  await execution.change({
    decision: decisionKeys.started(request.operationId),
    kind: 'operation-started',
    message: 'reboot requested',
    vmmId: vmm.id,
    set: { state: 'rebooting' },
    operation: { request, status: 'running' }
  })
  execution.enterPhase('rebooting', `VMM ${vmm.id} on ${vmm.hostId}`)
  if (await rebootInPlace(execution, vmm.id, vmm.hostId)) {
    execution.enterPhase('running')
    await execution.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message: 'rebooted',
      vmmId: vmm.id,
      set: { state: 'running' },
      operation: { request, status: 'succeeded' }
    })
    return
  }
  execution.enterPhase('replacing', `VMM ${vmm.id}`)
  await execution.change({
    decision: decisionKeys.replacing(request.operationId),
    kind: 'state-changed',
    message: 'VM did not come back from reboot; replacing its VMM',
    vmmId: vmm.id
  })
  await destroyOnHost(execution, execution.vmm(vmm.id) ?? vmm)
  await bootNewVmm(execution, request)
}

/** True once the VM is running again after `vm.reboot`, false if it is not within the boot timeout. */
async function rebootInPlace (execution: InstanceContext, vmmId: string, hostId: string): Promise<boolean> {
  let answer
  try {
    answer = await agents.rebootVmm({ hostId, vmmId })
  } catch (err) {
    // The agent refused (the VMM is no longer running): not coming back by itself.
    if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return false
    throw err
  }
  execution.observe(answer)
  if (answer.state === 'running') return true
  const back = (): boolean => execution.isRunning(vmmId) && (execution.vmm(vmmId)?.generation ?? 0) > answer.generation
  if (await execution.waitFor(() => execution.isGone(vmmId) || back(), execution.settings.bootTimeoutMs)) return back()
  // No report by the deadline is not a report that the VM did not come back (I2): its agent is
  // asked before the VMM is killed, as a start's boot deadline does.
  await describeOnHost(execution, { hostId, vmmId })
  return back()
}
