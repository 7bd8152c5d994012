/**
 * Reboot: `vm.reboot` inside the same VMM process. If the VM is not running again within the
 * boot timeout, or the VMM dies on the way, the VMM is killed and the instance starts on a fresh
 * VMM (with fencing and placement, like any start).
 */
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow'
import { agents } from './activities.js'
import type { RebootRequest } from './definitions.js'
import type { InstanceExecution, OperationBody } from './execution.js'
import { bootNewVmm } from './start.js'
import { destroyOnHost, isGone, isRunning } from './vmm-actions.js'

export const reboot: OperationBody<RebootRequest> = async (x, request) => {
  const vmm = x.activeVmm()
  if (vmm === null || vmm.state !== 'running' || x.instance.state !== 'running') {
    const message = `cannot reboot an instance that is ${x.instance.state}`
    await x.change({ kind: 'operation-finished', message, operation: { request, status: 'failed', error: { code: 'Conflict', message } } })
    return
  }
  await x.change({
    kind: 'operation-started',
    message: 'reboot requested',
    vmmId: vmm.id,
    set: { state: 'rebooting' },
    operation: { request, status: 'running' }
  })
  x.phase = 'rebooting'
  const rebooted = await rebootInPlace(x, vmm.id, vmm.hostId)
  if (rebooted) {
    x.phase = 'running'
    await x.change({ kind: 'operation-finished', message: 'rebooted', vmmId: vmm.id, set: { state: 'running' }, operation: { request, status: 'succeeded' } })
    return
  }
  x.phase = 'replacing'
  await x.change({ kind: 'state-changed', message: 'VM did not come back from reboot; replacing its VMM', vmmId: vmm.id })
  await destroyOnHost(x, x.vmm(vmm.id) ?? vmm)
  await bootNewVmm(x, request)
}

/** True once the VM is running again after `vm.reboot`, false if it is not within the boot timeout. */
async function rebootInPlace (x: InstanceExecution, vmmId: string, hostId: string): Promise<boolean> {
  let answer
  try {
    answer = await agents.rebootVmm({ hostId, vmmId })
  } catch (err) {
    // The agent refused (the VMM is no longer running): not coming back by itself.
    if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return false
    throw err
  }
  await x.observe(answer)
  if (answer.state === 'running') return true
  const back = await x.conditionWithReports(
    () => isGone(x, vmmId) || (isRunning(x, vmmId) && (x.vmm(vmmId)?.generation ?? 0) > answer.generation),
    x.settings.bootTimeoutMs
  )
  return back && isRunning(x, vmmId)
}
