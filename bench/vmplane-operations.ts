/**
 * vmplane's operations as a user drives them: one HTTP request each, held by `?wait=` until the
 * operation ends (followed past the held request's 25 s when it waits its turn longer), and
 * checked for the outcome it names. An operation that did not end where it should throws, so
 * the load counts it as a failure rather than timing it.
 */
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

  /** The answer once the operation has ended: the held request's, or its row's when followed past it. */
  async function ended (request: Promise<ApiResponse<Answer>>, what: string, state: string): Promise<Answer> {
    const began = Date.now()
    let { status, body } = await request
    while (status === 202 && body.operation?.status === 'running' && Date.now() - began < OPERATION_BOUND_MS) {
      await sleep(FOLLOW_POLL_MS)
      const operation = await client.get<NonNullable<Answer['operation']>>(`/v1/operations/${body.operation.id}`)
      if (operation.body.status === 'running') continue
      const instance = await client.get<Answer['instance']>(`/v1/instances/${body.instance.id}`)
      status = 200
      body = { instance: instance.body, operation: operation.body }
    }
    if (status !== 200) throw new Error(`${what}: answered ${status} ${JSON.stringify(body)}`)
    if (body.operation?.status !== 'succeeded' || body.instance.state !== state) {
      throw new Error(`${what}: operation ${body.operation?.status ?? 'missing'}, instance ${body.instance.state} (expected ${state})`)
    }
    return body
  }

  return {
    async createAndStart (name) {
      const answer = await ended(client.post<Answer>(`/v1/instances?wait=${WAIT_SECONDS}`, {
        name, vcpus: 1, memoryMiB: 64, boot: { kernel: 'vmlinux', cmdline: BENCH_CMDLINE }
      }), 'create', 'running')
      return { instanceId: answer.instance.id, operation: answer.operation! }
    },
    async stop (instanceId) {
      await ended(client.post<Answer>(`/v1/instances/${instanceId}/stop?wait=${WAIT_SECONDS}`, { graceSeconds: 30 }), 'stop', 'stopped')
    },
    async remove (instanceId) {
      await ended(client.delete<Answer>(`/v1/instances/${instanceId}?wait=${WAIT_SECONDS}`), 'delete', 'destroyed')
    }
  }
}
