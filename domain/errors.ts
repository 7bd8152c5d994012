/**
 * The error taxonomy of docs/design.md §5. Workflows decide from the class, never from a message.
 *
 * - `InvalidRequest`: the host agent or the VMM refused what was asked (4xx). Retrying the same
 *   thing cannot help; the operation fails with the reason and the instance state is unchanged.
 * - `VmmNotFound`: the agent affirms it does not have a VMM it should have. The VM is really
 *   gone; this is one of the few positive signals that may fail a VMM (I2).
 * - `HostUnreachable`: connection refused or reset, timeouts, 5xx. Unknown is not dead:
 *   retry with backoff and never change state because of it.
 *
 * The names double as Temporal failure types, so retry policies can list the non-retryable ones.
 */

export const ERROR_CLASSES = ['InvalidRequest', 'VmmNotFound', 'HostUnreachable'] as const
export type ErrorClass = (typeof ERROR_CLASSES)[number]

export const NON_RETRYABLE_ERROR_CLASSES: ErrorClass[] = ['InvalidRequest', 'VmmNotFound']

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

/** Maps an HTTP status from a host agent to its class. */
export function classifyAgentStatus (status: number): ErrorClass {
  if (status === 404) return 'VmmNotFound'
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return 'InvalidRequest'
  return 'HostUnreachable'
}
