import { z } from 'zod'
import { FIREWALL_DIRECTIONS, FIREWALL_PROTOCOLS } from '../../domain/firewall.js'
import { ipv4RangeSchema } from '../../domain/host-agent-api.js'
import { NO_NUL_PATTERN, UNPAIRED_SURROGATE } from '../../domain/limits.js'
import { nameOrIdSchema } from './common.js'

const ref = z.union([
  z.strictObject({ network: nameOrIdSchema('a network') }),
  z.strictObject({ instance: nameOrIdSchema('an instance') })
], { error: 'must be {"network": name or ID} or {"instance": name or ID}, one of the two' })

const port = z.number().int().min(1).max(65535)

export const createFirewallRuleBody = z.strictObject({
  target: ref.describe('what the rule applies to: every instance of a network of the project, or one instance'),
  direction: z.enum(FIREWALL_DIRECTIONS).default('ingress')
    .describe('ingress: traffic into the target from the peer; egress: out of the target to the peer (once an egress rule applies to an instance, only what egress rules allow leaves it for outside its network)'),
  protocol: z.enum(FIREWALL_PROTOCOLS),
  ports: z.strictObject({ from: port, to: port }).refine((ports) => ports.from <= ports.to, 'from must be at most to').optional()
    .describe('for tcp and udp; absent: every port'),
  peer: z.union([
    z.strictObject({ cidr: ipv4RangeSchema }),
    z.strictObject({ network: nameOrIdSchema('a network') }),
    z.strictObject({ instance: nameOrIdSchema('an instance') })
  ], { error: 'must be {"cidr": range}, {"network": name or ID} or {"instance": name or ID}, one of the three' }).describe('where the traffic may come from (ingress) or go to (egress): an address range, a network or an instance of the project'),
  // Stored in PostgreSQL's text, which takes no NUL (a 500 otherwise) and would store an unpaired surrogate as U+FFFD.
  description: z.string().max(256).regex(NO_NUL_PATTERN, 'must not contain a NUL character')
    .refine((text) => !UNPAIRED_SURROGATE.test(text), 'must be valid Unicode (no unpaired surrogate)').default('')
}).refine((rule) => rule.ports === undefined || rule.protocol === 'tcp' || rule.protocol === 'udp', { message: 'ports are for tcp and udp', path: ['ports'] })
  .meta({ id: 'CreateFirewallRule' })

const named = z.object({ id: z.uuid(), name: z.string() })

export const firewallRuleSchema = z.object({
  id: z.uuid(),
  target: z.union([z.object({ network: named }), z.object({ instance: named })]),
  direction: z.enum(FIREWALL_DIRECTIONS),
  protocol: z.enum(FIREWALL_PROTOCOLS),
  ports: z.object({ from: z.number().int(), to: z.number().int() }).nullable(),
  peer: z.union([z.object({ cidr: z.string() }), z.object({ network: named }), z.object({ instance: named })]),
  description: z.string(),
  createdAt: z.string()
}).meta({ id: 'FirewallRule' })

export const firewallRuleListSchema = z.object({ items: z.array(firewallRuleSchema) })
export const firewallRuleParamsSchema = z.strictObject({ rule: z.uuid() })
