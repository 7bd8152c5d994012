/** The floor's activity: nothing but its round trip, and the report a host agent would send. */
import type { Client } from '@temporalio/client'
import { floorReportSignal, type FloorActivities } from './contract.js'

export function createFloorActivities (client: Client): FloorActivities {
  return {
    /** Returns at once; then signals its execution, as an agent reports the VM running. */
    async ensure (workflowId) {
      const handle = client.workflow.getHandle(workflowId)
      setImmediate(() => {
        handle.signal(floorReportSignal).catch((error: unknown) => { console.error(`floor: a report to ${workflowId} failed:`, error) })
      })
    }
  }
}
