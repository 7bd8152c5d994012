/**
 * Create: the instance's row exists (the API inserted it; should the API have died before its
 * transaction committed, the execution inserted it from the request when it opened), then it
 * starts if asked.
 */
import { decisionKeys } from '../domain/decisions.js'
import type { CreateRequest } from '../domain/requests.js'
import type { InstanceContext } from './instance-context.js'
import { bootNewVmm } from './start.js'

export async function create (execution: InstanceContext, request: CreateRequest): Promise<void> {
  if (!request.start) {
    execution.enterPhase('stopped')
    await execution.change({
      decision: decisionKeys.finished(request.operationId),
      kind: 'operation-finished',
      message: 'created',
      set: { state: 'stopped' },
      operation: { request, status: 'succeeded' }
    })
    return
  }
  await bootNewVmm(execution, request, {
    decision: decisionKeys.started(request.operationId),
    kind: 'operation-started',
    message: 'created; starting',
    set: { state: 'starting' },
    operation: { request, status: 'running' }
  })
}
