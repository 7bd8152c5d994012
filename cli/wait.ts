/**
 * `--wait`: polls the operation and its instance until the operation ends, feeding every state
 * seen to the progress line, then says whether it succeeded. Giving up at the timeout leaves the
 * operation running: only the CLI stops watching.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Instance, Operation } from './api-types.js'
import type { Context } from './context.js'
import { ApiError, CliError, EXIT } from './errors.js'
import type { Progress } from './progress.js'

const POLL_INTERVAL_MS = 300
/** When a rate-limited poll's answer says nothing about when to come back. */
const RATE_LIMITED_PAUSE_MS = 1000

export interface Outcome {
  instance: Instance
  operation: Operation
}

export async function waitForOperation (
  { api, project }: Context,
  started: Outcome,
  timeoutMs: number,
  progress: Progress
): Promise<Outcome> {
  const deadline = performance.now() + timeoutMs
  let { instance, operation } = started
  progress.observe(instance.state)
  try {
    while (operation.status === 'running') {
      const left = deadline - performance.now()
      if (left <= 0) {
        throw new CliError(`gave up waiting after ${timeoutMs / 1000} s: ${operation.kind} ${operation.id} is still running and ${instance.name} is ${instance.state}`, EXIT.timedOut)
      }
      await sleep(Math.min(POLL_INTERVAL_MS, left))
      try {
        // The operation first: once it has ended, the instance read after it shows the end state.
        operation = await api.get<Operation>(`${project}/operations/${operation.id}`)
        instance = await api.get<Instance>(`${project}/instances/${instance.id}`)
      } catch (error) {
        // Polling too fast for a rate limit is no reason to give up on the operation.
        if (!(error instanceof ApiError) || error.status !== 429) throw error
        await sleep(Math.min(error.retryAfterSeconds === null ? RATE_LIMITED_PAUSE_MS : error.retryAfterSeconds * 1000, Math.max(0, deadline - performance.now())))
        continue
      }
      progress.observe(instance.state)
    }
  } finally {
    progress.end()
  }
  return { instance, operation }
}

/** Exit 1 unless the operation succeeded: a script must not take a failed start for a start. */
export function ensureSucceeded ({ instance, operation }: Outcome): void {
  if (operation.status === 'succeeded') return
  if (operation.status === 'superseded') {
    throw new CliError(`${operation.kind} ${operation.id} was superseded by a later request; ${instance.name} is ${instance.state}`, EXIT.refused)
  }
  const reason = operation.error == null ? 'no reason recorded' : `${operation.error.code}: ${operation.error.message}`
  throw new CliError(`${operation.kind} ${operation.id} failed: ${reason}; ${instance.name} is ${instance.state}`, EXIT.refused)
}
