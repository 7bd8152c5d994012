/** The floor's activities: nothing but their round trips, and the signals a host agent would send. */
import type { Client } from '@temporalio/client'
import { floorReportSignal } from './workflows.js'

export interface FloorActivities {
  ensure: (workflowId: string, signals: number) => Promise<void>
  noop: () => Promise<void>
}

export function createFloorActivities (client: Client): FloorActivities {
  return {
    /** Returns at once; then signals its execution `signals` times, one after another. */
    async ensure (workflowId, signals) {
      const handle = client.workflow.getHandle(workflowId)
      setImmediate(() => {
        (async () => {
          for (let i = 0; i < signals; i++) await handle.signal(floorReportSignal)
        })().catch((error: unknown) => { console.error(`floor: a report to ${handle.workflowId} failed:`, error) })
      })
    },
    async noop () {}
  }
}
