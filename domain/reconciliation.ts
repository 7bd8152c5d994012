/**
 * What the reconciler decides from what a host has and what PostgreSQL records: the pure half of
 * activities/reconciler.ts, which has the theory of operation and carries these decisions out.
 *
 * Everything found young (younger than the orphan grace period) is left alone for this pass: a
 * start in flight has the time to record what it made, and a file being written to finish it.
 */
import type { SegmentView, StorageListing, StrayView, TapView, VmmPolicy, VmmView } from './host-agent-api.js'
import { isTerminalVmmState, type VmmRecord } from './vmm.js'

/** A VMM PostgreSQL holds on the host, with whether its instance is destroyed. */
export interface KnownVmm {
  vmm: VmmRecord
  instanceDestroyed: boolean
}

/** When the pass runs and how old something must be before it is mended (epoch ms, ms). */
export interface PassClock {
  now: number
  graceMs: number
}

function young (since: string, clock: PassClock): boolean {
  return clock.now - Date.parse(since) < clock.graceMs
}

/** What a host's pass does about one thing it found. */
export type HostMend =
  /** A live VMM the control plane does not know, knows as gone, or whose instance is destroyed. */
  | { mend: 'reap-orphan', vmm: VmmView, why: string }
  | { mend: 'orphan-waiting', vmm: VmmView }
  /** A VMM the agent reports at a newer generation than PostgreSQL holds: a report that never arrived. */
  | { mend: 'resend-report', vmm: VmmView, recordedGeneration: number }
  /**
   * The same, of a change made a moment ago: an ensure's answer or the agent's outbox is still
   * carrying it, and sending it as well would only make the instance's execution record it twice.
   */
  | { mend: 'report-waiting', vmm: VmmView }
  /**
   * A VMM PostgreSQL holds live that the agent's inventory lacks, though the agent has reported
   * it before: gone only if the agent, asked about it now, affirms it has no such VMM (the
   * inventory was read before PostgreSQL; a VMM made in between is missing from it).
   */
  | { mend: 'ask-if-gone', vmm: VmmRecord }
  /** A VMM process no agent record owns. */
  | { mend: 'reap-stray', stray: StrayView }
  | { mend: 'stray-waiting', stray: StrayView }
  /** A TAP no live VMM on the host has. */
  | { mend: 'remove-tap', tap: TapView }
  /** A network's segment with no TAP on it once the pass has removed the TAPs no live VMM has, and no route to it. */
  | { mend: 'remove-segment', segment: SegmentView }
  /**
   * A live VMM whose host enforces other firewall rules than its instance's as PostgreSQL resolves
   * them now (a change's push that never arrived, a peer instance gone): sent the current policy.
   */
  | { mend: 'push-policy', vmm: VmmView, policy: VmmPolicy }

/** What the reconciler reads from a host's agent. */
export interface HostInventory {
  vmms: VmmView[]
  strays: StrayView[]
  taps: TapView[]
  segments: SegmentView[]
}

/** Whether two policies allow the same, whatever their generations. */
function samePolicy (a: VmmPolicy | null, b: VmmPolicy): boolean {
  const { generation: _a, ...allowsA } = a ?? { generation: 0, ingress: [], egress: null, routes: [] }
  const { generation: _b, ...allowsB } = b
  return JSON.stringify(allowsA) === JSON.stringify(allowsB)
}

/**
 * What to mend on a host, in the order to do it, from its inventory and what PostgreSQL holds:
 * its VMMs and their records, and `policies`, the current firewall policy of the instances of its
 * live VMMs.
 */
export function hostMends (found: HostInventory, known: ReadonlyMap<string, KnownVmm>, policies: ReadonlyMap<string, VmmPolicy>, clock: PassClock): HostMend[] {
  const mends: HostMend[] = []
  for (const view of found.vmms) {
    const row = known.get(view.id)
    if (!isTerminalVmmState(view.state) && (row === undefined || isTerminalVmmState(row.vmm.state) || row.instanceDestroyed)) {
      if (young(view.createdAt, clock)) {
        mends.push({ mend: 'orphan-waiting', vmm: view })
        continue
      }
      const why = row === undefined ? 'unknown to the control plane' : row.instanceDestroyed ? 'its instance is destroyed' : `recorded ${row.vmm.state}`
      mends.push({ mend: 'reap-orphan', vmm: view, why })
    } else if (row !== undefined && !isTerminalVmmState(row.vmm.state) && view.generation > row.vmm.generation) {
      mends.push(young(view.updatedAt, clock) ? { mend: 'report-waiting', vmm: view } : { mend: 'resend-report', vmm: view, recordedGeneration: row.vmm.generation })
    }
    const policy = policies.get(view.instanceId)
    if (!isTerminalVmmState(view.state) && policy !== undefined && !samePolicy(view.policy, policy)) mends.push({ mend: 'push-policy', vmm: view, policy })
  }
  const listed = new Set(found.vmms.map((v) => v.id))
  for (const { vmm } of known.values()) {
    // A VMM its host has never reported (generation 0) may not be there yet: the start that
    // placed it is still on its way to the agent, and its own boot deadline ends it if it never arrives.
    if (isTerminalVmmState(vmm.state) || listed.has(vmm.id) || vmm.generation === 0 || young(vmm.createdAt, clock)) continue
    mends.push({ mend: 'ask-if-gone', vmm })
  }
  for (const stray of found.strays) {
    mends.push(young(stray.startedAt, clock) ? { mend: 'stray-waiting', stray } : { mend: 'reap-stray', stray })
  }
  for (const tap of found.taps) {
    if (tap.vmmId === null) mends.push({ mend: 'remove-tap', tap })
  }
  const owned = new Set(found.taps.filter((tap) => tap.vmmId !== null).map((tap) => tap.name))
  for (const segment of found.segments) {
    if (!segment.routed && !segment.taps.some((tap) => owned.has(tap))) mends.push({ mend: 'remove-segment', segment })
  }
  return mends
}

/** A file of the shared storage that nothing live owns. */
export interface StoredOrphan {
  kind: 'disks' | 'seeds' | 'partial'
  name: string
  why: string
  /** Younger than the grace period: left for this pass. */
  waiting: boolean
}

/**
 * The shared storage's orphans: a disk no live disk row names, a seed of an instance that is not
 * live, a file left half-made. Their rows come before them and go after them, so none is in use.
 */
export function storageOrphans (listing: StorageListing, live: { disks: ReadonlySet<string>, instances: ReadonlySet<string> }, clock: PassClock): StoredOrphan[] {
  const orphan = (kind: StoredOrphan['kind'], name: string, modifiedAt: string, why: string): StoredOrphan =>
    ({ kind, name, why, waiting: young(modifiedAt, clock) })
  return [
    ...listing.disks.filter((disk) => !live.disks.has(disk.diskId))
      .map((disk) => orphan('disks', disk.diskId, disk.modifiedAt, 'no live disk is recorded with its ID')),
    ...listing.seeds.filter((seed) => !live.instances.has(seed.instanceId))
      .map((seed) => orphan('seeds', seed.instanceId, seed.modifiedAt, 'its instance is not live')),
    ...listing.partial.map((file) => orphan('partial', file.name, file.modifiedAt, 'left half-made'))
  ]
}
