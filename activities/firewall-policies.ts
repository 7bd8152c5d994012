/**
 * Telling hosts of the firewall rules (docs/design.md §19): each live VMM's agent is sent its
 * instance's policy as PostgreSQL resolves it now (db/firewall-rules.ts `policiesOf`), with the
 * generation it was resolved at, which the agent keeps only if it is newer than what it has. So a
 * push that comes late or twice changes nothing, and the newest rules win whatever the order.
 */
import type { FirewallActivities } from '../contract/activities.js'
import { policiesOf } from '../db/firewall-rules.js'
import { liveVmmsOf } from '../db/vmms.js'
import { onAgent, type AgentCallDependencies } from './host-agent-calls.js'

export function createFirewallPolicies (deps: AgentCallDependencies): FirewallActivities {
  return {
    /** Sends each live VMM of the instances its policy; fails (to be retried) if any agent did not take it. */
    async pushFirewallPolicies (instanceIds) {
      const policies = await policiesOf(deps.pool, instanceIds)
      const vmms = await liveVmmsOf(deps.pool, instanceIds)
      const pushes = await Promise.allSettled(vmms.map(async (vmm) =>
        await onAgent(deps, vmm.hostId, (url) => deps.client.setPolicy(url, vmm.id, policies.get(vmm.instanceId)!))))
      const failed = pushes.filter((push): push is PromiseRejectedResult => push.status === 'rejected')
      if (failed.length > 0) throw new Error(`${failed.length} of ${vmms.length} VMMs' agents did not take their policy: ${String(failed[0]!.reason)}`)
      return vmms.length
    }
  }
}
