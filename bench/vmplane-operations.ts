/**
 * vmplane's operations as a careful user drives them: one HTTP request each, under an
 * `Idempotency-Key`, held by `?wait=` until the operation ends (followed by its row past the held
 * request's 25 s when it waits its turn longer), and checked for the outcome it names. On a
 * saturated machine an answer can come later than the client's 30 s timeout; the request is then
 * sent again under its key, which finds the first attempt's operation (or waits its turn while
 * that attempt still runs, 409), as the API's contract tells clients to do: the operation is timed
 * whole and counted once. An operation that did not end where it should throws, so the load counts
 * it as a failure rather than timing it.
 */
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { api, type ApiResponse } from '../test/helpers/launcher.js'

/** Seconds the API holds a request; within the helper's 30 s request timeout. */
const WAIT_SECONDS = 25
/**
 * With 100 in flight on a saturated machine an operation can wait its turn longer than one held
 * request lasts; it is then followed by its operation's row until this bound, and timed whole.
 */
const OPERATION_BOUND_MS = 180_000
const FOLLOW_POLL_MS = 50
/** How long a request waits before it is sent again under its key, when still in progress (409). */
const IN_PROGRESS_RETRY_MS = 1000
/** The simulator boots and powers off at once: what is measured is the control plane. */
export const BENCH_CMDLINE = 'console=ttyS0 sim.boot_ms=0 sim.shutdown_ms=0'

interface Answer {
  instance: { id: string, state: string }
  operation: { id: string, status: string, workflowId: string, runId: string } | null
}

export interface VmplaneOperations {
  /** Creates and starts an instance, to `running`; returns its ID and the create's operation. */
  createAndStart: (name: string) => Promise<{ instanceId: string, operation: NonNullable<Answer['operation']> }>
  stop: (instanceId: string) => Promise<void>
  remove: (instanceId: string) => Promise<void>
}

export function vmplaneOperations (stack: { apiUrl: string, apiToken: string }): VmplaneOperations {
  const client = api(stack)

  /** Sends again what lost its answer to the client's timeout, until the operation's bound. */
  async function untilAnswered<T> (send: () => Promise<ApiResponse<T>>, began: number): Promise<ApiResponse<T>> {
    for (;;) {
      try {
        const answer = await send()
        if (answer.status !== 409 || answer.headers.get('retry-after') === null) return answer
        await sleep(IN_PROGRESS_RETRY_MS)
      } catch (error) {
        if ((error as Error).name !== 'TimeoutError' || Date.now() - began >= OPERATION_BOUND_MS) throw error
      }
    }
  }

  /** The answer once the operation has ended: the held request's, or its row's when followed past it. */
  async function ended (method: string, path: string, request: unknown, what: string, state: string): Promise<Answer> {
    const began = Date.now()
    const key = { 'idempotency-key': randomUUID() }
    let answer = await untilAnswered(async () => await client.request<Answer>(method, path, request, key), began)
    while (answer.status === 202 && answer.body.operation?.status === 'running' && Date.now() - began < OPERATION_BOUND_MS) {
      await sleep(FOLLOW_POLL_MS)
      const { instance: { id: instanceId }, operation: { id: operationId } } = answer.body
      const operation = await untilAnswered(async () => await client.get<NonNullable<Answer['operation']>>(`/v1/operations/${operationId}`), began)
      if (operation.body.status === 'running') continue
      const instance = await untilAnswered(async () => await client.get<Answer['instance']>(`/v1/instances/${instanceId}`), began)
      answer = { status: 200, headers: instance.headers, body: { instance: instance.body, operation: operation.body } }
    }
    const { status, body } = answer
    if (status !== 200) throw new Error(`${what}: answered ${status} ${JSON.stringify(body)}`)
    if (body.operation?.status !== 'succeeded' || body.instance.state !== state) {
      throw new Error(`${what}: operation ${body.operation?.status ?? 'missing'}, instance ${body.instance.state} (expected ${state})`)
    }
    return body
  }

  return {
    async createAndStart (name) {
      const answer = await ended('POST', `/v1/instances?wait=${WAIT_SECONDS}`, {
        name, vcpus: 1, memoryMiB: 64, boot: { kernel: 'vmlinux', cmdline: BENCH_CMDLINE }
      }, 'create', 'running')
      return { instanceId: answer.instance.id, operation: answer.operation! }
    },
    async stop (instanceId) {
      await ended('POST', `/v1/instances/${instanceId}/stop?wait=${WAIT_SECONDS}`, { graceSeconds: 30 }, 'stop', 'stopped')
    },
    async remove (instanceId) {
      await ended('DELETE', `/v1/instances/${instanceId}?wait=${WAIT_SECONDS}`, undefined, 'delete', 'destroyed')
    }
  }
}
