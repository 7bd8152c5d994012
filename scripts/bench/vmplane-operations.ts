/**
 * vmplane's operations as a user drives them: one HTTP request each, held by `?wait=` until the
 * operation ends, and checked for the outcome it names. An operation that did not end where it
 * should throws, so the load counts it as a failure rather than timing it.
 */
import { api, type ApiResponse } from '../dev-stack/launcher.js'

/** Seconds the API holds a request; within the helper's 30 s request timeout. */
const WAIT_SECONDS = 25
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
  return {
    async createAndStart (name) {
      const answer = ended(await client.post<Answer>(`/v1/instances?wait=${WAIT_SECONDS}`, {
        name, vcpus: 1, memoryMiB: 64, boot: { kernel: 'vmlinux', cmdline: BENCH_CMDLINE }
      }), 'create', 'running')
      return { instanceId: answer.instance.id, operation: answer.operation! }
    },
    async stop (instanceId) {
      ended(await client.post<Answer>(`/v1/instances/${instanceId}/stop?wait=${WAIT_SECONDS}`, { graceSeconds: 30 }), 'stop', 'stopped')
    },
    async remove (instanceId) {
      ended(await client.delete<Answer>(`/v1/instances/${instanceId}?wait=${WAIT_SECONDS}`), 'delete', 'destroyed')
    }
  }
}

function ended (response: ApiResponse<Answer>, what: string, state: string): Answer {
  const { status, body } = response
  if (status !== 200) throw new Error(`${what}: answered ${status} ${JSON.stringify(body)}`)
  if (body.operation?.status !== 'succeeded' || body.instance.state !== state) {
    throw new Error(`${what}: operation ${body.operation?.status ?? 'missing'}, instance ${body.instance.state} (expected ${state})`)
  }
  return body
}
