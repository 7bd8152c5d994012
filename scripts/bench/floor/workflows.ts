/**
 * The floor: Temporal's own cost for an operation shaped like vmplane's start, with no vmplane
 * logic. It takes the start's timers, activity round trips and signals as counted in a recorded
 * history of vmplane's create-and-start (shape.ts), in the same order: timers first (the
 * start's snapshot boundary), then the first activity (the host's `ensureVmm`), whose worker
 * then signals the execution as a host agent reports, then the remaining activities. Local
 * activities are vmplane's PostgreSQL writes: they are vmplane's cost, not Temporal's, and are
 * left out.
 */
import { condition, defineSignal, proxyActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow'
import type { FloorActivities } from './activities.js'

export interface OperationShape {
  timers: number
  activities: number
  signals: number
}

export const floorReportSignal = defineSignal('floorReport')

const { ensure, noop } = proxyActivities<FloorActivities>({ startToCloseTimeout: '20 seconds' })

export async function floorOperation (shape: OperationShape): Promise<void> {
  let reports = 0
  setHandler(floorReportSignal, () => { reports++ })
  for (let i = 0; i < shape.timers; i++) await sleep(1)
  if (shape.activities > 0) await ensure(workflowInfo().workflowId, shape.signals)
  await condition(() => reports >= shape.signals)
  for (let i = 1; i < shape.activities; i++) await noop()
}
