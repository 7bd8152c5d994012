/**
 * Names an interface's MAC address and its TAP device after the interface's ID, so every host,
 * every retry and every VMM of the instance derives the same ones (I3), and the reconciler can
 * tell whose a TAP is from its name alone.
 *
 * The MAC takes the last six bytes of the ID (random in the UUIDs vmplane makes: v4, v5 and the
 * `rand_b` of v7), made locally administered and unicast: 46 random bits. PostgreSQL keeps live
 * MACs unique, so a collision is refused, never shared. The TAP's name is `vmp` and the MAC's
 * twelve hex digits: 15 bytes, Linux's limit, and unique wherever the MAC is.
 */

const TAP_PREFIX = 'vmp'

/** The network an instance's interface is on when the request names none. */
export const DEFAULT_NETWORK = 'default'

/** Linux interface names are at most 15 bytes (IFNAMSIZ minus the NUL). */
export const MAX_INTERFACE_NAME_BYTES = 15

export function macOf (interfaceId: string): string {
  const hex = interfaceId.replaceAll('-', '').slice(-12).toLowerCase()
  const first = (Number.parseInt(hex.slice(0, 2), 16) & 0xfc) | 0x02
  const bytes = [first.toString(16).padStart(2, '0'), ...hex.slice(2).match(/../g)!]
  return bytes.join(':')
}

export function tapNameOf (interfaceId: string): string {
  return TAP_PREFIX + macOf(interfaceId).replaceAll(':', '')
}

/** Whether a device name is one vmplane gives TAPs (the reconciler only ever touches those). */
export function isVmplaneTapName (name: string): boolean {
  return name.length === MAX_INTERFACE_NAME_BYTES && name.startsWith(TAP_PREFIX) && /^[0-9a-f]{12}$/.test(name.slice(TAP_PREFIX.length))
}

/**
 * Virtio-net queues: one RX/TX pair per vCPU, up to 8 pairs (`num_queues` counts both). More
 * than one pair needs a multi-queue TAP; the TAP's flag must match, or Cloud Hypervisor refuses
 * it (cloud-hypervisor #738).
 */
export function netQueuesFor (vcpus: number): number {
  return 2 * Math.min(Math.max(vcpus, 1), 8)
}
