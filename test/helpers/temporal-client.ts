/**
 * A Temporal client on a stack's server and namespace, for what a test reads or asks of Temporal
 * directly (histories, descriptions, lists); its connection is closed once the work is done.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client'
import type { StackInfo } from '../../stack/stack-file.js'

export async function withTemporalClient<T> (info: Pick<StackInfo, 'temporalAddress' | 'namespace'>, work: (client: Client) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address: info.temporalAddress })
  try {
    return await work(new Client({ connection, namespace: info.namespace }))
  } finally {
    await connection.close()
  }
}

/** The activities an execution scheduled, in order (local activities are markers, not listed). */
export async function activitiesScheduled (handle: WorkflowHandle): Promise<string[]> {
  const { events } = await handle.fetchHistory()
  return (events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? [])
}
