/**
 * Operations: a user's request to change an instance, and its recorded outcome (I5).
 *
 * Every operation runs inside a workflow execution with the instance's workflow ID. A stop or
 * delete that arrives while a create, start, reboot or migrate runs preempts it: the running execution
 * switches to the stop path, and the preempted operation ends `superseded`.
 */

export const OPERATION_KINDS = ['create', 'start', 'stop', 'reboot', 'delete', 'migrate'] as const
export type OperationKind = (typeof OPERATION_KINDS)[number]

export const OPERATION_STATUSES = ['running', 'succeeded', 'failed', 'superseded'] as const
export type OperationStatus = (typeof OPERATION_STATUSES)[number]

export interface OperationError {
  code: string
  message: string
}

export interface Operation {
  id: string
  kind: OperationKind
  instanceId: string
  status: OperationStatus
  error: OperationError | null
  startedAt: string
  finishedAt: string | null
  workflowId: string
  runId: string | null
}
