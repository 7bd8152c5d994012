/**
 * Create: make sure the instance's row exists (the API inserted it; should the API have died
 * before its transaction committed, the row is inserted from the request), then start it if asked.
 */
import type { CreateRequest } from './definitions.js'
import type { OperationBody } from './execution.js'
import { bootNewVmm } from './start.js'

export const create: OperationBody<CreateRequest> = async (x, request) => {
  if (!request.start) {
    x.phase = 'stopped'
    await x.change({
      kind: 'operation-finished',
      message: 'created',
      set: { state: 'stopped' },
      operation: { request, status: 'succeeded' }
    })
    return
  }
  await x.change({
    kind: 'operation-started',
    message: 'created; starting',
    set: { state: 'starting' },
    operation: { request, status: 'running' }
  })
  await bootNewVmm(x, request)
}
