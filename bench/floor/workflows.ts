/**
 * The floor: the least Temporal can do for "create and start a VM", with no vmplane logic. One
 * workflow start, one activity round trip (the call to the host's agent), one signal in (the
 * agent's report that the VM runs), then completion. Its shape is fixed: it does not grow when
 * vmplane's does, so vmplane's figures beside it show what vmplane's own work costs.
 */
import { condition, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow'
import { floorReportSignal, type FloorActivities } from './contract.js'

const { ensure } = proxyActivities<FloorActivities>({ startToCloseTimeout: '20 seconds' })

export async function floorOperation (): Promise<void> {
  let reported = false
  setHandler(floorReportSignal, () => { reported = true })
  await ensure(workflowInfo().workflowId)
  await condition(() => reported)
}
