/** The number of events in an execution's history, read once the execution has ended. */
import type { Client } from '@temporalio/client'

export async function historyLength (client: Client, execution: { workflowId: string, runId: string }): Promise<number> {
  const handle = client.workflow.getHandle(execution.workflowId, execution.runId)
  // The operation is recorded as finished a task before its execution ends: read it whole.
  await handle.result()
  return (await handle.fetchHistory()).events?.length ?? 0
}
