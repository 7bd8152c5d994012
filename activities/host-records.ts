/**
 * Host records: liveness from heartbeats (written by each host's monitor workflow) and contact
 * from the calls the control plane makes to the host's agent (written by those activities).
 *
 * A heartbeat registers the host on first contact, keeps its address, capacity, storage and
 * images current,
 * and brings an `unreachable` host back to `active`. A `lost` host stays lost: only an operator
 * fenced it, and only an operator may bring it back (I6). Calls that fail are tracked apart, in
 * `contact_failing_since`: a host may heartbeat and still not answer, and either way the control
 * plane cannot reach it.
 *
 * Neither changes any instance's state (I2). Each instance with a live VMM on the host is told in
 * its events when the host becomes unreachable (silent for the threshold, or calls failing for
 * it) and when it answers again; its conditions show the same (domain/conditions.ts).
 *
 * The statements are db/'s (db/hosts.ts, db/images.ts, db/instance-events.ts).
 */
import { createHash } from 'node:crypto'
import { clearContactFailing, lockHostStatus, noteContactFailing, setContactFailureNoted, setHostUnreachable, upsertHostFromHeartbeat } from '../db/hosts.js'
import { recordHostImages } from '../db/images.js'
import { tellInstancesOnHost } from '../db/instance-events.js'
import { inTransaction, type Pool } from '../db/pool.js'
import type { HostAnnouncement, HostStatus } from '../domain/host.js'

export async function recordHostHeartbeat (pool: Pool, announcement: HostAnnouncement): Promise<HostStatus> {
  return await inTransaction(pool, async (tx) => {
    const before = await lockHostStatus(tx, announcement.hostId)
    const status = await upsertHostFromHeartbeat(tx, announcement)
    const images = announcement.images ?? []
    await recordHostImages(tx, announcement.hostId, images, createHash('sha256').update(JSON.stringify(images)).digest('hex'))
    if (before === 'unreachable') {
      await tellInstancesOnHost(tx, announcement.hostId, `host ${announcement.hostId} is heard from again`)
    }
    return status
  })
}

/** Marks a silent host unreachable, from the moment it was last heard of (if known here). */
export async function markHostUnreachable (pool: Pool, hostId: string, lastHeardAt: string | null): Promise<void> {
  await inTransaction(pool, async (tx) => {
    const since = await setHostUnreachable(tx, hostId, lastHeardAt)
    if (since !== null) {
      await tellInstancesOnHost(tx, hostId, `host ${hostId} unreachable: no heartbeat since ${since}; its instances keep their last known state`)
    }
  })
}

/** A call to the host's agent could not get an answer (refused, timed out, 5xx; another token or no such route). */
export async function noteContactFailed (pool: Pool, hostId: string, unreachableAfterMs: number): Promise<void> {
  await inTransaction(pool, async (tx) => {
    const failing = await noteContactFailing(tx, hostId)
    if (failing === null || failing.noted) return
    if (Date.now() - Date.parse(failing.since) < unreachableAfterMs) return
    await setContactFailureNoted(tx, hostId)
    await tellInstancesOnHost(tx, hostId, `host ${hostId} unreachable: calls to its agent have failed since ${failing.since}; its instances keep their last known state`)
  })
}

/** A call to the host's agent got an answer. One statement, a no-op unless calls were failing. */
export async function noteContactWorked (pool: Pool, hostId: string): Promise<void> {
  if (await clearContactFailing(pool, hostId)) await tellInstancesOnHost(pool, hostId, `host ${hostId}'s agent answers again`)
}
