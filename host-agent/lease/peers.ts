/**
 * Asking a peer, for the agent's lease (docs/design.md §17), whether it holds its own: the peer's
 * agent answers from its own lease (`GET /v1/lease`).
 */
import { leaseStateSchema, type LeasePeer } from '../../domain/host-agent-api.js'
import type { PeerAnswer } from '../../domain/host-lease.js'

/** Whether the peer holds its lease; null when it did not answer in time, or not as that peer. */
export async function askPeer (peer: LeasePeer, timeoutMs: number, token: string): Promise<PeerAnswer> {
  try {
    const response = await fetch(new URL('/v1/lease', peer.agentUrl), {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(timeoutMs)
    })
    if (!response.ok) return null
    const state = leaseStateSchema.parse(await response.json())
    return state.hostId === peer.hostId ? state.holds : null
  } catch {
    return null
  }
}
