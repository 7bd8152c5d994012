/**
 * `?wait=<seconds>` on a mutating request: after the operation is accepted, the answer is held
 * until the operation ends (its row in PostgreSQL has `finishedAt`), the seconds run out, or the
 * client goes away. The row is the operation's one source of truth for outcomes, whichever
 * execution ran it (a stop can finish inside a create's execution), so the wait reads it rather
 * than a workflow result. It reads the row again when PostgreSQL says the operation finished
 * (operation-finishes.ts), and at least every second in case that word was lost.
 */
import type { OperationFinishes } from '../plugins/operation-finishes.js'
import type { Accepted } from './instance-requests.js'
import type { InstancesRepository } from './instances-repository.js'

const FALLBACK_POLL_MS = 1000

/**
 * Waits for an accepted operation: 200 with the instance and the ended operation, or the 202 it
 * was (with fresh views) if it is still running when the time is up.
 */
export async function waitForOperation (
  repository: InstancesRepository,
  finishes: OperationFinishes,
  accepted: Accepted,
  seconds: number,
  gone: AbortSignal
): Promise<Accepted> {
  const operationId = accepted.operation?.id
  if (accepted.status !== 202 || operationId === undefined) return accepted
  const deadline = Date.now() + seconds * 1000
  let operation = accepted.operation
  while (!gone.aborted) {
    const word = finishes.next(operationId, Math.max(0, Math.min(FALLBACK_POLL_MS, deadline - Date.now())), gone)
    operation = await repository.findOperation(operationId)
    if (operation?.finishedAt != null || Date.now() >= deadline) break
    await word
  }
  const instance = await repository.find(accepted.instance.id) ?? accepted.instance
  return { ...accepted, status: operation?.finishedAt == null ? 202 : 200, instance, operation }
}
