/**
 * IPv4 arithmetic for checking a network before PostgreSQL sees it: a CIDR's host bits, its
 * first and last addresses, whether an address lies inside. Addresses are validated as dotted
 * quads by the schemas first.
 */

export function toNumber (address: string): number {
  return address.split('.').reduce((value, octet) => value * 256 + Number(octet), 0)
}

export function toAddress (value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.')
}

export interface Cidr {
  base: number
  prefix: number
  size: number
}

export function parseCidr (cidr: string): Cidr {
  const [address, prefix] = cidr.split('/')
  const bits = Number(prefix)
  return { base: toNumber(address!), prefix: bits, size: 2 ** (32 - bits) }
}

/** Whether the address part has no bit set past the prefix (`10.0.0.0/24`, not `10.0.0.5/24`). */
export function isNetworkAddress (cidr: Cidr): boolean {
  return cidr.base % cidr.size === 0
}

/** Whether the address is one the network can give: inside it, neither its first nor its last. */
export function isHostAddressOf (cidr: Cidr, address: string): boolean {
  const value = toNumber(address)
  return value > cidr.base && value < cidr.base + cidr.size - 1
}

/** The network's first usable address, its gateway by default. */
export function firstHostAddress (cidr: Cidr): string {
  return toAddress(cidr.base + 1)
}

/** The network an address with its prefix is in: `10.0.0.5/24` is in `10.0.0.0/24`. */
export function networkOf (addressWithPrefix: string): string {
  const { base, prefix, size } = parseCidr(addressWithPrefix)
  return `${toAddress(base - base % size)}/${prefix}`
}
