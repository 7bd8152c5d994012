/**
 * What the floor's workflow and its activity share (workflows.ts, activities.ts), as vmplane's
 * contract/ does for its own: the activity's interface and the signal that stands for an agent's
 * report. Definitions only: the workflow bundle imports it.
 */
import { defineSignal } from '@temporalio/workflow'

export interface FloorActivities {
  ensure: (workflowId: string) => Promise<void>
}

export const floorReportSignal = defineSignal('floorReport')
