/**
 * Hosts: hypervisor machines, each with one host agent.
 *
 * A host is `unreachable` while its agent is silent and `active` again when it returns; that
 * never changes the state of its instances (I2). Only an operator makes a host `lost`, which
 * fences its VMMs so their instances can start elsewhere (I6).
 */

export const HOST_STATUSES = ['active', 'unreachable', 'lost'] as const
export type HostStatus = (typeof HOST_STATUSES)[number]

export interface HostCapacity {
  vcpus: number
  memoryMiB: number
}

/** What an agent announces about itself with every heartbeat. */
export interface HostAnnouncement {
  hostId: string
  agentUrl: string
  capacity: HostCapacity
  /** When this agent process started; a change means the agent restarted. */
  agentStartedAt: string
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
