/** How many timers, activity round trips and signals an operation's execution took, read off its history. */
import type { Client } from '@temporalio/client'
import type { OperationShape } from './workflows.js'

export async function shapeOf (client: Client, execution: { workflowId: string, runId: string }): Promise<OperationShape> {
  const handle = client.workflow.getHandle(execution.workflowId, execution.runId)
  // The operation is recorded as finished a task before its execution ends: read it whole.
  await handle.result()
  const history = await handle.fetchHistory()
  const events = history.events ?? []
  const count = (has: (event: (typeof events)[number]) => unknown): number => events.filter((event) => has(event) != null).length
  return {
    timers: count((e) => e.timerFiredEventAttributes),
    activities: count((e) => e.activityTaskScheduledEventAttributes),
    signals: count((e) => e.workflowExecutionSignaledEventAttributes)
  }
}
