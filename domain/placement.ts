/**
 * Placement's choice (activities/vmm-records.ts records it): of the hosts that may take a VMM
 * (active, uncordoned, with the base image of a boot disk not made yet, and for a migration's
 * target not the source's), one with room for it, spreading load: the most free memory, then
 * the most free vCPUs, then the first by ID, so the same facts always give the same host.
 */

/** A host that may take the VMM, and what it has left once its reservations are counted. */
export interface HostRoom {
  id: string
  freeVcpus: number
  freeMemoryMiB: number
}

/** The host to place a VMM of this size on, or null when none has room. `hosts` come by ID. */
export function chooseHost (hosts: readonly HostRoom[], need: { vcpus: number, memoryMiB: number }): string | null {
  const fitting = hosts.filter((h) => h.freeVcpus >= need.vcpus && h.freeMemoryMiB >= need.memoryMiB)
  // A stable sort: hosts with the same room stay in their order, by ID.
  fitting.sort((a, b) => b.freeMemoryMiB - a.freeMemoryMiB || b.freeVcpus - a.freeVcpus)
  return fitting[0]?.id ?? null
}
