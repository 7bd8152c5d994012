/**
 * `?wait=<seconds>` on a mutating request: after the operation is accepted, the answer is held
 * until the operation ends (its row in PostgreSQL has `finishedAt`), the seconds run out, or the
 * client goes away. The row is the operation's one source of truth for outcomes, whichever
 * execution ran it (a stop can finish inside a create's execution), so the wait reads it rather
 * than a workflow result. Polling every 100 ms costs one indexed read per waiting request.
 */
import type { Accepted } from './instance-requests.js'
import type { InstancesRepository } from './instances-repository.js'

const POLL_MS = 100

/**
 * Waits for an accepted operation: 200 with the instance and the ended operation, or the 202 it
 * was (with fresh views) if it is still running when the time is up.
 */
export async function waitForOperation (
  repository: InstancesRepository,
  accepted: Accepted,
  seconds: number,
  gone: AbortSignal
): Promise<Accepted> {
  const operationId = accepted.operation?.id
  if (accepted.status !== 202 || operationId === undefined) return accepted
  const deadline = Date.now() + seconds * 1000
  let operation = accepted.operation
  while (operation?.finishedAt == null && Date.now() < deadline && !gone.aborted) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, deadline - Date.now())))
    operation = await repository.findOperation(operationId)
  }
  const instance = await repository.find(accepted.instance.id) ?? accepted.instance
  return { ...accepted, status: operation?.finishedAt == null ? 202 : 200, instance, operation }
}
