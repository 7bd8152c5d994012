/**
 * The API's answers, typed from the zod schemas that produce them (type-only imports: the CLI
 * loads neither zod nor the API at run time), so a change to the API breaks the CLI's build.
 */
import type { z } from 'zod'
import type { hostListSchema, hostSchema } from '../api/schemas/hosts.js'
import type { firewallRuleListSchema, firewallRuleSchema } from '../api/schemas/firewall-rules.js'
import type { acceptedSchema, eventListSchema, eventSchema, instanceListSchema, instanceSchema } from '../api/schemas/instances.js'
import type { imageListSchema, imageSchema } from '../api/schemas/images.js'
import type { networkListSchema, networkSchema } from '../api/schemas/networks.js'
import type { operationSchema } from '../api/schemas/operations.js'
import type { newTokenSchema, projectListSchema, projectSchema, quotasSchema, tokenListSchema, tokenSchema } from '../api/schemas/projects.js'

export type Instance = z.infer<typeof instanceSchema>
export type InstanceList = z.infer<typeof instanceListSchema>
export type InstanceEvent = z.infer<typeof eventSchema>
export type EventList = z.infer<typeof eventListSchema>
export type Operation = z.infer<typeof operationSchema>
export type Accepted = z.infer<typeof acceptedSchema>
export type Host = z.infer<typeof hostSchema>
export type HostList = z.infer<typeof hostListSchema>
export type Network = z.infer<typeof networkSchema>
export type NetworkList = z.infer<typeof networkListSchema>
export type FirewallRule = z.infer<typeof firewallRuleSchema>
export type FirewallRuleList = z.infer<typeof firewallRuleListSchema>
export type Image = z.infer<typeof imageSchema>
export type ImageList = z.infer<typeof imageListSchema>
export type Project = z.infer<typeof projectSchema>
export type ProjectList = z.infer<typeof projectListSchema>
export type Quotas = z.infer<typeof quotasSchema>
export type Token = z.infer<typeof tokenSchema>
export type NewToken = z.infer<typeof newTokenSchema>
export type TokenList = z.infer<typeof tokenListSchema>
