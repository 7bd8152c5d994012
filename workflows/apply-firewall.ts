/**
 * Telling the hosts of a change of the firewall rules (docs/design.md §19), started by the API
 * once the change is committed, its generation in the workflow's ID: the live VMMs of the
 * instances it concerns are sent their instance's current policy, tried until every agent took
 * it. An agent keeps the newest generation it was sent, so executions of several changes may
 * run in any order; and a VMM made meanwhile got the current rules with its ensure.
 */
import type { ApplyFirewallInput } from '../contract/workflows.js'
import { agents } from './activity-proxies.js'

export async function applyFirewall (input: ApplyFirewallInput): Promise<number> {
  return await agents.pushFirewallPolicies(input.instanceIds)
}
