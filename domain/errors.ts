/**
 * The error taxonomy of docs/design.md §5. Workflows decide from the class, never from a message.
 *
 * - `InvalidRequest`: the host agent or the VMM refused what was asked (4xx). Retrying the same
 *   thing cannot help; the operation fails with the reason and the instance state is unchanged.
 * - `VmmNotFound`: the agent affirms it does not have a VMM it should have (a 404 whose body says
 *   so, `AGENT_NOT_FOUND_ERRORS`). The VM is really gone; this is one of the few positive signals
 *   that may fail a VMM (I2).
 * - `AgentMisconfigured`: what answers at the agent's URL does not take the control plane's
 *   calls: 401 or 403 (the agent and the control plane hold different tokens), or a 404 that is
 *   not the agent's answer about a VMM (no such route: another program, an agent of another
 *   version, a proxy). Not an answer about anything asked: an operator fixes it, so it is retried
 *   like `HostUnreachable`, and a 404 from it never means a VMM is gone.
 * - `HostUnreachable`: connection refused or reset, timeouts, 5xx. Unknown is not dead:
 *   retry with backoff and never change state because of it.
 *
 * The names double as Temporal failure types, so retry policies can list the non-retryable ones.
 */

export const ERROR_CLASSES = ['InvalidRequest', 'VmmNotFound', 'AgentMisconfigured', 'HostUnreachable'] as const
export type ErrorClass = (typeof ERROR_CLASSES)[number]

export const NON_RETRYABLE_ERROR_CLASSES: ErrorClass[] = ['InvalidRequest', 'VmmNotFound']

/**
 * The `error` of the agent's 404 that answers about the thing asked for: it has no record of the
 * VMM, or the process is not (or no longer) a stray. Any other 404 is not the agent's answer.
 */
export const AGENT_NOT_FOUND_ERRORS = { vmm: 'VmmNotFound', stray: 'StrayNotFound' } as const

export class HostAgentError extends Error {
  constructor (
    readonly errorClass: ErrorClass,
    message: string,
    readonly status: number | null = null
  ) {
    super(message)
    this.name = errorClass
  }
}

/**
 * Maps an error from a host agent to its class: its HTTP status, and the `error` of its body when
 * the body is the agent's `{error, message}` (null when it is not).
 */
export function classifyAgentError (status: number, error: string | null): ErrorClass {
  if (status === 404) return isAgentNotFound(error) ? 'VmmNotFound' : 'AgentMisconfigured'
  if (status === 401 || status === 403) return 'AgentMisconfigured'
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return 'InvalidRequest'
  return 'HostUnreachable'
}

function isAgentNotFound (error: string | null): boolean {
  return Object.values(AGENT_NOT_FOUND_ERRORS).some((marker) => marker === error)
}
