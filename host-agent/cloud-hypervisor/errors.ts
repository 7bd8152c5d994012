/**
 * The two ways a Cloud Hypervisor API call fails:
 *
 * - `VmmApiError`: the VMM answered with an error status. Cloud Hypervisor (v52+) sends the
 *   error chain as a JSON array of strings, outermost first; `chain` carries it.
 * - `VmmUnreachableError`: no usable answer. The socket is missing or refuses connections,
 *   the call timed out or was aborted, or the bytes were not HTTP. The VMM may still be alive:
 *   unknown is not dead (I2).
 */

export class VmmApiError extends Error {
  override name = 'VmmApiError'

  constructor (
    readonly endpoint: string,
    readonly status: number,
    readonly chain: string[]
  ) {
    super(`${endpoint} failed with ${status}: ${chain.length > 0 ? chain.join(': ') : 'no error body'}`)
  }
}

export type UnreachableReason = 'no-socket' | 'refused' | 'reset' | 'timeout' | 'aborted' | 'protocol'

export class VmmUnreachableError extends Error {
  override name = 'VmmUnreachableError'

  constructor (
    readonly endpoint: string,
    readonly reason: UnreachableReason,
    detail: string
  ) {
    super(`${endpoint}: ${detail}`)
  }
}

/** Reads an error body: the JSON array of the chain, or whatever else came as one message. */
export function parseErrorChain (body: string): string[] {
  if (body.trim() === '') return []
  try {
    const parsed: unknown = JSON.parse(body)
    if (Array.isArray(parsed) && parsed.every((item) => typeof item === 'string')) return parsed
    // micro_http's own errors (for example the 11th connection's 503) are {"error": "..."}.
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed && typeof parsed.error === 'string') {
      return [parsed.error]
    }
  } catch {
    // Not JSON: fall through and keep the text.
  }
  return [body.trim()]
}
