/**
 * A client for Cloud Hypervisor's REST API on its Unix socket, written for what the real
 * program does rather than what its spec says (cloud-hypervisor-notes §2):
 *
 * - One kept-alive connection per VMM (`maxSockets: 1`): the VMM handles one request at a
 *   time anyway and keeps at most 10 connections open, so the client never opens more than
 *   one. It keeps it across the agent's pings (every 10 s by default) and lets it go only after
 *   IDLE_CONNECTION_MS without a call: a connection made for each ping cost the agent 1.8 ms of
 *   CPU a ping, 18 % of a core at rest with 1,000 VMMs (`npm run bench:agent -- --vmms 1000`),
 *   where a ping on a kept connection costs next to nothing.
 * - `Content-Length` is always set, from `Buffer.byteLength`: the VMM reads bodies only through
 *   it. Endpoints without a body get none (`Content-Length: 0`); they answer 400 to any body.
 * - Every call has a timeout, except the long ones (`vm.boot`, `vm.reboot`,
 *   `vm.receive-migration`), which take an AbortSignal instead: a boot may legitimately take long,
 *   a receive lasts as long as the migration, and while either runs the VMM answers nothing else,
 *   so its caller decides when to give up. `vm.info` takes one too when the caller knows the API
 *   is held (a receive an earlier agent issued) and wants the answer whenever it comes.
 * - `vm.send-migration` is not long: since v53 it answers once the migration's worker runs, and
 *   the migration's progress and end come as events.
 * - Errors come back as `VmmApiError` with the status and the JSON-array error chain, or as
 *   `VmmUnreachableError` when there is no usable answer (errors.ts).
 */
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http'
import { parseErrorChain, VmmApiError, VmmUnreachableError, type UnreachableReason } from './errors.js'
import type { VmConfig } from './vm-config.js'

export interface VmmPingResponse {
  build_version?: string
  version: string
  pid?: number
  features?: string[]
}

export type VmState = 'Created' | 'Running' | 'Shutdown' | 'Paused' | 'BreakPoint'

/** The body of `vm.send-migration` (the spec's SendMigrationData, the fields vmplane sets). */
export interface SendMigrationData {
  destination_url: string
  downtime_ms: number
  timeout_s: number
}

export interface VmInfo {
  config: VmConfig
  state: VmState
  memory_actual_size?: number
}

/** How long an idle kept-alive connection stays open before the client closes it: past a ping's interval. */
const IDLE_CONNECTION_MS = 30_000
/** A VMM's answers are small; anything larger is not an answer. */
const MAX_RESPONSE_BYTES = 1024 * 1024

interface CallOptions {
  body?: unknown
  /** Aborts a long call; calls without one get the client's timeout. */
  signal?: AbortSignal
}

export class CloudHypervisorClient {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 1, timeout: IDLE_CONNECTION_MS })

  constructor (
    readonly socketPath: string,
    readonly timeoutMs: number
  ) {}

  async ping (): Promise<VmmPingResponse> {
    return await this.#call('GET', 'vmm.ping') as VmmPingResponse
  }

  /** Asks the VMM process to exit (it answers 200 and exits 0). */
  async shutdownVmm (): Promise<void> {
    await this.#call('PUT', 'vmm.shutdown')
  }

  async createVm (config: VmConfig): Promise<void> {
    await this.#call('PUT', 'vm.create', { body: config })
  }

  async bootVm (signal: AbortSignal): Promise<void> {
    await this.#call('PUT', 'vm.boot', { signal })
  }

  async rebootVm (signal: AbortSignal): Promise<void> {
    await this.#call('PUT', 'vm.reboot', { signal })
  }

  /** Pauses the running VM (its vCPUs and devices); 500 while a migration owns it or it is paused already. */
  async pauseVm (): Promise<void> {
    await this.#call('PUT', 'vm.pause')
  }

  async resumeVm (): Promise<void> {
    await this.#call('PUT', 'vm.resume')
  }

  /** The VM's config and state; with a signal, waits for an API held by a long call instead of timing out. */
  async info (signal?: AbortSignal): Promise<VmInfo> {
    return await this.#call('GET', 'vm.info', { signal }) as VmInfo
  }

  /** Listens at `receiverUrl` and receives a VM; answers when the migration has ended (a long call). */
  async receiveMigration (receiverUrl: string, signal: AbortSignal): Promise<void> {
    await this.#call('PUT', 'vm.receive-migration', { body: { receiver_url: receiverUrl }, signal })
  }

  /** Starts sending the VM; answers once the migration is under way (v53+). */
  async sendMigration (data: SendMigrationData): Promise<void> {
    await this.#call('PUT', 'vm.send-migration', { body: data })
  }

  async powerButton (): Promise<void> {
    await this.#call('PUT', 'vm.power-button')
  }

  async shutdownVm (): Promise<void> {
    await this.#call('PUT', 'vm.shutdown')
  }

  async deleteVm (): Promise<void> {
    await this.#call('PUT', 'vm.delete')
  }

  /** Closes the connection; calls still queued fail. */
  close (): void {
    this.#agent.destroy()
  }

  async #call (method: 'GET' | 'PUT', endpoint: string, options: CallOptions = {}): Promise<unknown> {
    const payload = options.body === undefined ? '' : JSON.stringify(options.body)
    const headers: Record<string, string | number> = {
      Accept: 'application/json',
      'Content-Length': Buffer.byteLength(payload)
    }
    if (payload !== '') headers['Content-Type'] = 'application/json'
    const { signal } = options
    let timedOut = false
    let timer: NodeJS.Timeout | null = null

    const response = await new Promise<{ status: number, text: string }>((resolve, reject) => {
      const req = httpRequest({
        agent: this.#agent,
        socketPath: this.socketPath,
        path: `/api/v1/${endpoint}`,
        method,
        headers,
        signal
      }, (res) => {
        readBody(endpoint, res).then(resolve, (err: Error) => {
          reject(err instanceof VmmUnreachableError ? err : unreachable(endpoint, err, timedOut, signal))
        })
      })
      // A call without a signal has the client's timeout: a timer cleared when the call ends,
      // not AbortSignal.timeout, whose signal and timer outlive the call by the whole timeout
      // and, at one ping a VMM every 10 s, kept the agent's old generation collecting.
      if (signal === undefined) {
        timer = setTimeout(() => {
          timedOut = true
          req.destroy()
        }, this.timeoutMs)
      }
      req.on('error', (err) => { reject(unreachable(endpoint, err, timedOut, signal)) })
      req.end(payload)
    }).finally(() => { if (timer !== null) clearTimeout(timer) })
    if (response.status >= 200 && response.status < 300) {
      return response.text === '' ? undefined : parseJson(endpoint, response.text)
    }
    throw new VmmApiError(endpoint, response.status, parseErrorChain(response.text))
  }
}

async function readBody (endpoint: string, res: IncomingMessage): Promise<{ status: number, text: string }> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > MAX_RESPONSE_BYTES) {
      res.destroy()
      throw new VmmUnreachableError(endpoint, 'protocol', `response larger than ${MAX_RESPONSE_BYTES} bytes`)
    }
    chunks.push(chunk)
  }
  return { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }
}

function parseJson (endpoint: string, text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw new VmmUnreachableError(endpoint, 'protocol', `answered with a body that is not JSON: ${text.slice(0, 200)}`)
  }
}

function unreachable (endpoint: string, err: Error & { code?: string }, timedOut: boolean, signal: AbortSignal | undefined): VmmUnreachableError {
  if (timedOut) return new VmmUnreachableError(endpoint, 'timeout', 'timed out')
  if (signal?.aborted === true) return new VmmUnreachableError(endpoint, 'aborted', 'aborted')
  const reasons: Record<string, UnreachableReason> = {
    ENOENT: 'no-socket',
    ECONNREFUSED: 'refused',
    ECONNRESET: 'reset',
    EPIPE: 'reset'
  }
  const reason = reasons[err.code ?? ''] ?? (err.code?.startsWith('HPE_') === true ? 'protocol' : 'reset')
  return new VmmUnreachableError(endpoint, reason, err.message)
}
