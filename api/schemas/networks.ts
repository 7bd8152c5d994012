import { z } from 'zod'
import { INSTANCE_NAME_PATTERN, LIMITS } from '../../domain/limits.js'
import { isNetworkAddress, parseCidr } from '../../domain/ipv4.js'
import { NETWORK_OUTBOUND } from '../../domain/network-segments.js'
import { nameOrIdSchema } from './common.js'

export const createNetworkBody = z.strictObject({
  name: z.string().max(LIMITS.nameMaxLength)
    .regex(INSTANCE_NAME_PATTERN, 'must be lower-case letters, digits and dashes, starting and ending with a letter or digit'),
  cidr: z.cidrv4()
    .refine((cidr) => {
      const { prefix } = parseCidr(cidr)
      return prefix >= LIMITS.networkPrefix.min && prefix <= LIMITS.networkPrefix.max
    }, `must have a prefix from /${LIMITS.networkPrefix.min} to /${LIMITS.networkPrefix.max}`)
    .refine((cidr) => isNetworkAddress(parseCidr(cidr)), 'must be the network\'s own address, with no bit set past the prefix (10.0.0.0/24, not 10.0.0.5/24)')
    .describe('an IPv4 range no other network overlaps'),
  gateway: z.ipv4().optional().describe('an address inside the range; by default its first (x.x.x.1 in a /24)'),
  outbound: z.enum(NETWORK_OUTBOUND).default('none')
    .describe("the way out to the hosts' LAN: nat (each interface's host translates its guest's connections to its own address) or none")
}).meta({ id: 'CreateNetwork' })

/** A network named by its name or its ID. */
export const networkRefSchema = nameOrIdSchema('a network')

export const networkParamsSchema = z.strictObject({ network: networkRefSchema })

export const networkSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  cidr: z.string(),
  gateway: z.string(),
  vni: z.number().int().describe('its VXLAN network identifier: the segment joining its interfaces across hosts'),
  mtu: z.number().int().describe("its interfaces' MTU (the hosts' LAN carries what VXLAN adds)"),
  outbound: z.enum(NETWORK_OUTBOUND),
  addressesInUse: z.number().int().describe('held by live interfaces'),
  addressesTotal: z.number().int().describe('the range less its network, broadcast and gateway addresses'),
  createdAt: z.string()
}).meta({ id: 'Network' })

export const networkListSchema = z.object({ items: z.array(networkSchema) })
