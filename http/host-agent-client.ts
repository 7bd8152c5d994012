/**
 * The control plane's client of the host agents' HTTP API (`domain/host-agent-api.ts`).
 *
 * Every failure comes out as a `HostAgentError` of one class (docs/design.md §5): a refusal is
 * `InvalidRequest`, an agent that affirms it has no such VMM is `VmmNotFound`, and everything
 * that leaves the truth unknown — refused or reset connections, timeouts, 5xx, a body that does
 * not parse — is `HostUnreachable`. Only the first two are answers; the rest are not facts about
 * the VM and must never change its state (I2).
 *
 * A 404 is `VmmNotFound` only when its body is the agent's and says so (`AGENT_NOT_FOUND_ERRORS`):
 * the same status from something else at the agent's URL (a route this agent does not have,
 * another program, a proxy) would otherwise read as a VMM gone and have a live VM recorded
 * destroyed. That 404, and a 401 or 403 (the agent holds another token), is `AgentMisconfigured`:
 * retried, as the operator's fix is awaited, and said plainly in the message, which names the
 * agent's URL and never the token.
 */
import { z } from 'zod'
import {
  agentErrorSchema,
  baseImageListSchema,
  policyGenerationSchema,
  removedSchema,
  segmentListSchema,
  storageListingSchema,
  strayListSchema,
  tapListSchema,
  vmmListSchema,
  vmmViewSchema,
  type BaseImage,
  type MigrationOfCall,
  type EnsureVmmRequest,
  type PowerButtonRequest,
  type SegmentView,
  type SendMigrationRequest,
  type StorageListing,
  type StrayView,
  type TapView,
  type VmmPolicy,
  type VmmView
} from '../domain/host-agent-api.js'
import { HostAgentError, classifyAgentError } from '../domain/errors.js'

export interface HostAgentClientOptions {
  token: string
  timeoutMs: number
}

export class HostAgentClient {
  constructor (private readonly options: HostAgentClientOptions) {}

  /** Ensures the VMM; with `incoming`, as a live migration's target that receives its VM. */
  async ensureVmm (agentUrl: string, vmmId: string, request: EnsureVmmRequest): Promise<VmmView> {
    return await this.call(agentUrl, 'PUT', `/v1/vmms/${vmmId}`, request, vmmViewSchema)
  }

  /** Gives a VMM its firewall policy; its agent keeps the newest generation. */
  async setPolicy (agentUrl: string, vmmId: string, policy: VmmPolicy): Promise<{ generation: number }> {
    return await this.call(agentUrl, 'PUT', `/v1/vmms/${vmmId}/policy`, policy, policyGenerationSchema)
  }

  /** Has a running VMM send its VM to a migration's target; idempotent on the migration. */
  async sendMigration (agentUrl: string, vmmId: string, request: SendMigrationRequest): Promise<VmmView> {
    return await this.call(agentUrl, 'POST', `/v1/vmms/${vmmId}/migration/send`, request, vmmViewSchema)
  }

  /**
   * Kills a migration's target unless it has finished receiving: the view shows phase `finished`
   * (too late, the migration stands) or a concluded VMM. A VMM the agent has no record of is 404
   * (`VmmNotFound`), and fenced: its ensure can no longer create it.
   */
  async cancelMigration (agentUrl: string, vmmId: string, request: MigrationOfCall): Promise<VmmView> {
    return await this.call(agentUrl, 'POST', `/v1/vmms/${vmmId}/migration/cancel`, request, vmmViewSchema)
  }

  /** Resumes a migration's source its agent held paused (its half `held`): the view shows it `failed`, the VM running on. */
  async resumeHeldSource (agentUrl: string, vmmId: string, request: MigrationOfCall): Promise<VmmView> {
    return await this.call(agentUrl, 'POST', `/v1/vmms/${vmmId}/migration/resume`, request, vmmViewSchema)
  }

  async getVmm (agentUrl: string, vmmId: string): Promise<VmmView> {
    return await this.call(agentUrl, 'GET', `/v1/vmms/${vmmId}`, undefined, vmmViewSchema)
  }

  /** The agent's view of the VMM; `null` when the agent affirms it has no record of it. */
  async findVmm (agentUrl: string, vmmId: string): Promise<VmmView | null> {
    return await unlessNotFound(this.getVmm(agentUrl, vmmId), null)
  }

  async listVmms (agentUrl: string): Promise<VmmView[]> {
    return (await this.call(agentUrl, 'GET', '/v1/vmms', undefined, vmmListSchema)).items
  }

  async pressPowerButton (agentUrl: string, vmmId: string, request: PowerButtonRequest): Promise<VmmView> {
    return await this.call(agentUrl, 'POST', `/v1/vmms/${vmmId}/power-button`, request, vmmViewSchema)
  }

  async rebootVmm (agentUrl: string, vmmId: string): Promise<VmmView> {
    return await this.call(agentUrl, 'POST', `/v1/vmms/${vmmId}/reboot`, {}, vmmViewSchema)
  }

  async listStrays (agentUrl: string): Promise<StrayView[]> {
    return (await this.call(agentUrl, 'GET', '/v1/strays', undefined, strayListSchema)).items
  }

  /** Kills a stray VMM process; false when it is not (or no longer) one. */
  async reapStray (agentUrl: string, stray: Pick<StrayView, 'pid' | 'startTime'>): Promise<boolean> {
    const reaped = this.call(agentUrl, 'DELETE', `/v1/strays/${stray.pid}?startTime=${stray.startTime}`, undefined, z.object({ reaped: z.literal(true) }))
    return await unlessNotFound(reaped.then(() => true), false)
  }

  /** Kills the VMM and waits for it; `null` when the agent has no record of it at all. */
  async destroyVmm (agentUrl: string, vmmId: string): Promise<VmmView | null> {
    return await unlessNotFound(this.call(agentUrl, 'DELETE', `/v1/vmms/${vmmId}`, undefined, vmmViewSchema), null)
  }

  async listImages (agentUrl: string): Promise<BaseImage[]> {
    return (await this.call(agentUrl, 'GET', '/v1/images', undefined, baseImageListSchema)).items
  }

  /** The storage directory every host mounts, as this agent sees it. */
  async listStorage (agentUrl: string): Promise<StorageListing> {
    return await this.call(agentUrl, 'GET', '/v1/storage', undefined, storageListingSchema)
  }

  /** Removes a file of the storage (`disks/<id>`, `seeds/<instanceId>`, `partial/<name>`); false when there was none. */
  async removeStored (agentUrl: string, kind: 'disks' | 'seeds' | 'partial', name: string): Promise<boolean> {
    return (await this.call(agentUrl, 'DELETE', `/v1/storage/${kind}/${name}`, undefined, removedSchema)).removed
  }

  async listTaps (agentUrl: string): Promise<TapView[]> {
    return (await this.call(agentUrl, 'GET', '/v1/taps', undefined, tapListSchema)).items
  }

  /** Removes a TAP no live VMM has; false when there was none. */
  async removeTap (agentUrl: string, name: string): Promise<boolean> {
    return (await this.call(agentUrl, 'DELETE', `/v1/taps/${name}`, undefined, removedSchema)).removed
  }

  async listSegments (agentUrl: string): Promise<SegmentView[]> {
    return (await this.call(agentUrl, 'GET', '/v1/segments', undefined, segmentListSchema)).items
  }

  async removeSegment (agentUrl: string, vni: number): Promise<boolean> {
    return (await this.call(agentUrl, 'DELETE', `/v1/segments/${vni}`, undefined, removedSchema)).removed
  }

  /** The end of the VMM's serial log. */
  async consoleLog (agentUrl: string, vmmId: string, bytes: number): Promise<string> {
    return await this.call(agentUrl, 'GET', `/v1/vmms/${vmmId}/console/log?bytes=${bytes}`, undefined, z.string(), 'text')
  }

  private async call<T> (agentUrl: string, method: string, path: string, body: unknown, schema: z.ZodType<T>, as: 'json' | 'text' = 'json'): Promise<T> {
    const where = `${method} ${agentUrl}${path}`
    let response: Response
    try {
      response = await fetch(new URL(path, agentUrl), {
        method,
        headers: {
          authorization: `Bearer ${this.options.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' })
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs)
      })
    } catch (err) {
      throw new HostAgentError('HostUnreachable', `${where}: ${describeFetchError(err)}`)
    }
    const text = await response.text().catch(() => '')
    if (!response.ok) throw agentFailure(where, response.status, text)
    const parsed = schema.safeParse(as === 'text' ? text : parseJson(text))
    if (!parsed.success) {
      throw new HostAgentError('HostUnreachable', `${where}: unexpected response: ${parsed.error.message}`, response.status)
    }
    return parsed.data
  }
}

function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** An error answer as its class, with the agent's message (or the start of whatever came instead). */
function agentFailure (where: string, status: number, text: string): HostAgentError {
  const body = agentErrorSchema.safeParse(parseJson(text))
  const errorClass = classifyAgentError(status, body.success ? body.data.error : null)
  const said = body.success ? body.data.message : text.slice(0, 200)
  const why = errorClass === 'AgentMisconfigured' ? `${misconfiguration(status)}: ` : ''
  return new HostAgentError(errorClass, `${where}: ${status} ${why}${said}`, status)
}

/** What an `AgentMisconfigured` status says is wrong, for the operator who must fix it. */
function misconfiguration (status: number): string {
  return status === 404
    ? 'not the agent\'s answer about what was asked (no such route: another program, or an agent of another version, at this URL?)'
    : 'authentication failed: the agent refused the control plane\'s token (is VMPLANE_AGENT_TOKEN the same on the agent and here?)'
}

function describeFetchError (err: unknown): string {
  if (!(err instanceof Error)) return String(err)
  if (err.name === 'TimeoutError') return 'timed out'
  const cause = (err as Error & { cause?: { code?: string, message?: string } }).cause
  return cause?.code ?? cause?.message ?? err.message
}

/** The call's answer, or `absent` when the agent affirms it has no such VMM (or stray). */
async function unlessNotFound<T, A> (call: Promise<T>, absent: A): Promise<T | A> {
  try {
    return await call
  } catch (err) {
    if (err instanceof HostAgentError && err.errorClass === 'VmmNotFound') return absent
    throw err
  }
}
