/**
 * Theory of operation: automatic restarts (restart policy `on-failure`).
 *
 * When an instance fails (its VMM crashed, vanished or was fenced with a lost host), `settle`
 * records, with the failure, when the instance restarts (`restartAt`, per `planRestart`: 10 s
 * doubling to 5 min, counted afresh after 10 min of running; host-lost failures do not count).
 * The instance shows `failed` with the condition `RestartBackoff{until}` meanwhile.
 *
 * The execution that settled the failure waits for `restartAt` on a durable timer, so the wait
 * survives a worker restart. It stops waiting for anything the user asks meanwhile: a stop or
 * delete cancels the restart (the halt clears `restartAt`), a start runs at once instead. When
 * the time comes it continues as a new `startInstance` execution with a start of its own making,
 * which fences, places and boots a fresh VMM like any start.
 */
import { condition, uuid4 } from '@temporalio/workflow'
import type { Instance } from '../domain/instance.js'
import type { StartRequest } from '../domain/requests.js'

/**
 * Waits for the instance's planned restart; returns the start to run, or null if there is none
 * or something arrived first (`interrupted` turned true) that the execution must handle instead.
 */
export async function awaitRestart (
  instance: Pick<Instance, 'id' | 'restartAt' | 'restartAttempts'>,
  interrupted: () => boolean
): Promise<StartRequest | null> {
  if (instance.restartAt === null) return null
  if (await condition(interrupted, Math.max(1, Date.parse(instance.restartAt) - Date.now()))) return null
  return {
    kind: 'start',
    operationId: uuid4(),
    instanceId: instance.id,
    requestedAt: new Date().toISOString(),
    automaticAttempt: instance.restartAttempts
  }
}
