/**
 * Hosts: hypervisor machines, each with one host agent.
 *
 * A host is `unreachable` while its agent is silent and `active` again when it returns; that
 * never changes the state of its instances (I2). Only an operator makes a host `lost`, which
 * fences its VMMs so their instances can start elsewhere (I6).
 */

export const HOST_STATUSES = ['active', 'unreachable', 'lost'] as const
export type HostStatus = (typeof HOST_STATUSES)[number]

/** Who declared a host lost: an operator, or its lease's bound passing (docs/design.md §17). */
export const LOST_BY = ['operator', 'lease'] as const
export type LostBy = (typeof LOST_BY)[number]

export interface HostCapacity {
  vcpus: number
  memoryMiB: number
}

/** A base disk image of a host (host-agent/images.ts). */
export interface HostImage {
  name: string
  format: 'raw' | 'qcow2'
  virtualSizeBytes: number
  sha256: string
}

/** What an agent announces about itself with every heartbeat. */
export interface HostAnnouncement {
  hostId: string
  agentUrl: string
  capacity: HostCapacity
  /** When this agent process started; a change means the agent restarted. */
  agentStartedAt: string
  /** The capacity of the shared storage the host mounts (absent from agents older than disks). */
  storageGiB?: number
  /** The base images in the host's image directory. */
  images?: HostImage[]
  /**
   * Present from an agent that keeps a lease (docs/design.md §17), renewed from the API, and pets a
   * watchdog set to `watchdogMs`: its monitor judges the lease. Absent from one that keeps none.
   */
  lease?: { watchdogMs: number }
}

export interface Host extends HostCapacity {
  id: string
  agentUrl: string
  status: HostStatus
  statusSince: string
  lastHeartbeatAt: string | null
  /** Since when calls to the host's agent fail (refused, timing out, 5xx); null while they work. */
  contactFailingSince: string | null
  reserved: HostCapacity
}
