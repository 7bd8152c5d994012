/**
 * The agent's lease beyond its own process (docs/design.md §17): the lease the agent holds, with
 * the peers its grant named, kept in the state directory (`lease.json`). A restarted agent (a crash, an upgrade) then holds what its
 * predecessor held until its term ends, and pets its watchdog at once, rather than letting it fence
 * a healthy host while its first grant comes; and it knows whom to ask if that grant does not
 * come. The term is kept on the host's monotonic clock, which runs across processes but starts
 * again at a boot: a lease kept before the host's last boot is dropped.
 */
import { readFile } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import type { Logger } from 'pino'
import { z } from 'zod'
import { leasePeerSchema, type LeasePeer } from '../../domain/host-agent-api.js'
import { writeFileAtomic } from '../store/record-store.js'

const LEASE_FILE = 'lease.json'

/** The host's monotonic clock, in ms: the same for every process, from the host's boot. */
export function monotonicMs (): number {
  return Number(process.hrtime.bigint() / 1_000_000n)
}

function bootId (): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
}

const savedLeaseSchema = z.object({
  bootId: z.string(),
  /** Since when the lease has been held without a break, and until when it holds, on `monotonicMs`'s clock. */
  heldSince: z.number(),
  holdsUntil: z.number(),
  termMs: z.number(),
  peers: z.array(leasePeerSchema)
})

export interface SavedLease {
  heldSince: number
  holdsUntil: number
  termMs: number
  peers: LeasePeer[]
}

/** The lease a predecessor of this boot kept, or null (none, another boot's, or unreadable). */
export async function readSavedLease (stateDir: string, log: Logger): Promise<SavedLease | null> {
  try {
    const saved = savedLeaseSchema.parse(JSON.parse(await readFile(`${stateDir}/${LEASE_FILE}`, 'utf8')))
    const { bootId: savedBoot, ...lease } = saved
    return savedBoot === bootId() ? lease : null
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ err }, `cannot read ${LEASE_FILE}; no lease held until the first grant`)
    return null
  }
}

/** Keeps the lease for a successor, in the background; a write that fails is logged. */
export function saveLease (stateDir: string, lease: SavedLease, log: Logger): void {
  writeFileAtomic(stateDir, LEASE_FILE, JSON.stringify({ bootId: bootId(), ...lease })).catch((err: unknown) => {
    log.warn({ err }, `cannot write ${LEASE_FILE}`)
  })
}
