/**
 * Replays executions from a stack's Temporal server on this checkout's workflow bundle, as a
 * worker does after a restart or a cache eviction. A history that does not replay is an instance
 * stuck until an operator resets it, whatever PostgreSQL says meanwhile: the crash campaign and
 * the fault tests check every execution they caused, not only the few recorded in
 * test/replay/histories.
 */
import { Worker } from '@temporalio/worker'
import { WORKFLOW_BUNDLE_PATH } from '../../worker/workflow-bundle.js'
import type { StackInfo } from '../../stack/stack-file.js'
import { withTemporalClient } from './temporal-client.js'

export interface ReplayResult {
  replayed: number
  /** `<workflow ID> <run ID>: <error>` for each execution that did not replay. */
  failures: string[]
}

/** Replays every execution the visibility query finds (all of them by default), closed or not. */
export async function replayExecutions (info: StackInfo, query?: string): Promise<ReplayResult> {
  return await withTemporalClient(info, async (client) => {
    const histories = client.workflow.list(query === undefined ? {} : { query }).intoHistories()
    const result: ReplayResult = { replayed: 0, failures: [] }
    for await (const replay of Worker.runReplayHistories({ workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }, histories)) {
      result.replayed++
      if (replay.error !== undefined) result.failures.push(`${replay.workflowId} ${replay.runId}: ${replay.error.message}`)
    }
    return result
  })
}
