/**
 * How a careful client drives vmplane through crashes: every mutating request carries an
 * `Idempotency-Key`, and is sent again with the same key while the API is unreachable, answers
 * 5xx (PostgreSQL or Temporal restarting), or answers 409 with `Retry-After` (an earlier attempt
 * under the key is still in progress). The retry finds what the first attempt made; it never
 * makes a second.
 */
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { api, type ApiResponse } from './launcher.js'

export interface RetryOptions {
  /** How long to keep trying before giving up. */
  timeoutMs?: number
  /** Called with each failed attempt, for logs. */
  onRetry?: (why: string) => void
}

export async function sendUntilAnswered<T = any> (
  stack: { apiUrl: string, apiToken: string },
  method: 'POST' | 'DELETE',
  path: string,
  body?: unknown,
  options: RetryOptions = {}
): Promise<ApiResponse<T>> {
  const key = randomUUID()
  const deadline = Date.now() + (options.timeoutMs ?? 120_000)
  for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 2000)) {
    let why: string
    try {
      const response = await api(stack).request<T>(method, path, body, { 'idempotency-key': key })
      const inProgress = response.status === 409 && response.headers.get('retry-after') !== null
      if (response.status < 500 && !inProgress) return response
      why = `${response.status} ${JSON.stringify(response.body)}`
    } catch (err) {
      why = (err as Error).message
    }
    if (Date.now() + delayMs > deadline) throw new Error(`${method} ${path} got no answer: ${why}`)
    options.onRetry?.(`${method} ${path}: ${why}; retrying with the same Idempotency-Key`)
    await sleep(delayMs)
  }
}
