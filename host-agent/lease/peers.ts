/**
 * The agent's peers, for its lease (docs/design.md §17): asking one whether it holds its lease,
 * and keeping the list the last grant named in the state directory, so that an agent restarted
 * while the control plane is down still knows whom to ask.
 */
import { readFile } from 'node:fs/promises'
import type { Logger } from 'pino'
import { z } from 'zod'
import { leasePeerSchema, leaseStateSchema, type LeasePeer } from '../../domain/host-agent-api.js'
import type { PeerAnswer } from '../../domain/host-lease.js'
import { writeFileAtomic } from '../store/record-store.js'

const PEER_FILE = 'lease-peers.json'

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

export async function readPeers (stateDir: string, log: Logger): Promise<LeasePeer[]> {
  try {
    return z.array(leasePeerSchema).parse(JSON.parse(await readFile(`${stateDir}/${PEER_FILE}`, 'utf8')))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ err }, `cannot read ${PEER_FILE}; no peers known until the first grant`)
    return []
  }
}

export function savePeers (stateDir: string, peers: LeasePeer[], log: Logger): void {
  writeFileAtomic(stateDir, PEER_FILE, JSON.stringify(peers)).catch((err: unknown) => {
    log.warn({ err }, `cannot write ${PEER_FILE}`)
  })
}
