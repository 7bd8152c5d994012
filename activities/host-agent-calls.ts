/**
 * Activities that act on VMMs through their host's agent. Each returns what the agent answered
 * as a `VmmReport`, so the workflow applies the answer exactly like a report the agent sent.
 * Their inputs and outputs are the contract's (`HostAgentActivities` in contract/activities.ts).
 *
 * Failures leave here as Temporal failures typed by their error class (`domain/errors.ts`):
 * workflows and retry policies branch on the type, never on the message.
 */
import { ApplicationFailure, log } from '@temporalio/activity'
import type { HostAgentActivities } from '../contract/activities.js'
import type { PlacementRequest, PlacementResult } from '../contract/records.js'
import { activeHostPreferring, agentUrlOf } from '../db/hosts.js'
import { storageOf } from '../db/instances.js'
import { policiesOf } from '../db/firewall-rules.js'
import { segmentsOfInterfaces } from '../db/networks.js'
import type { Pool } from '../db/pool.js'
import { HostAgentError, NON_RETRYABLE_ERROR_CLASSES } from '../domain/errors.js'
import { crashPoint } from '../faults/crash-points.js'
import type { EnsureVmmRequest, PlannedVmmSpec, VmmSpec, VmmView } from '../domain/host-agent-api.js'
import type { VmmReport } from '../domain/vmm.js'
import type { HostAgentClient } from '../http/host-agent-client.js'
import { noteContactFailed, noteContactWorked } from './host-records.js'

/**
 * Calls a host's agent and keeps track of whether the host can be reached (host-records.ts):
 * a failure that is no answer (`HostUnreachable`, `AgentMisconfigured`) counts as contact
 * failing, an answer as contact working. Failures leave as Temporal failures typed by their error
 * class. An agent that does not take the control plane's calls is logged as an error, naming the
 * host and its URL: only an operator can fix it. The worker heartbeats while it waits
 * (worker/activity-heartbeats.ts).
 */
export async function onAgent<T> (deps: AgentCallDependencies, hostId: string, call: (agentUrl: string) => Promise<T>): Promise<T> {
  const agentUrl = await agentUrlOf(deps.pool, hostId)
  if (agentUrl === null) throw ApplicationFailure.nonRetryable(`host ${hostId} is not registered`, 'InvalidRequest')
  try {
    const answer = await call(agentUrl)
    await noteContactWorked(deps.pool, hostId)
    return answer
  } catch (err) {
    if (!(err instanceof HostAgentError)) throw err
    const answered = NON_RETRYABLE_ERROR_CLASSES.includes(err.errorClass)
    if (err.errorClass === 'AgentMisconfigured') {
      log.error('the host agent does not take the control plane\'s calls; its setup needs an operator', { hostId, agentUrl, error: err.message })
    }
    if (answered) await noteContactWorked(deps.pool, hostId)
    else await noteContactFailed(deps.pool, hostId, deps.unreachableAfterMs)
    throw ApplicationFailure.create({ type: err.errorClass, message: err.message, nonRetryable: answered })
  }
}

export interface AgentCallDependencies {
  pool: Pool
  client: HostAgentClient
  unreachableAfterMs: number
}

export function createHostAgentCalls (deps: AgentCallDependencies): HostAgentActivities {
  const { client } = deps
  return {
    async ensureVmm (input) {
      const request = await ensureRequest(deps.pool, input.instanceId, input.instanceName, input.spec)
      const view = await onAgent(deps, input.hostId, (url) => client.ensureVmm(url, input.vmmId, {
        ...request,
        ...input.incoming === undefined ? {} : { incoming: input.incoming }
      }))
      crashPoint('ensure.after-agent')
      return toReport(view, input.hostId)
    },

    /** Has the source VMM send its VM to the target; the report's `migration` says how far it got. */
    async sendMigration (input) {
      const { migrationId, destinationUrl, downtimeMs, timeoutS } = input
      const view = await onAgent(deps, input.hostId, (url) => client.sendMigration(url, input.vmmId, { migrationId, destinationUrl, downtimeMs, timeoutS }))
      crashPoint('send.after-agent')
      return toReport(view, input.hostId)
    },

    /**
     * Kills the migration's target unless it has finished receiving: the report shows phase
     * `finished` (too late: the migration stands) or a concluded VMM. An agent with no record of
     * the VMM fails it `VmmNotFound`, having fenced the ID so that no later ensure creates it.
     */
    async cancelIncomingMigration (input) {
      const view = await onAgent(deps, input.hostId, (url) => client.cancelMigration(url, input.vmmId, { migrationId: input.migrationId }))
      crashPoint('cancel.after-agent')
      return toReport(view, input.hostId)
    },

    /** Has a migration's source, held paused by its agent, resume the VM: the target does not have it. */
    async resumeHeldSource (input) {
      const view = await onAgent(deps, input.hostId, (url) => client.resumeHeldSource(url, input.vmmId, { migrationId: input.migrationId }))
      return toReport(view, input.hostId)
    },

    /**
     * Presses the power button and has the agent kill the VMM at the deadline. The host's clock is
     * not the control plane's, so the agent is told the time left, reckoned here as the call
     * leaves (each attempt anew; none left when the deadline has passed), and sets the deadline on
     * its own clock when the call arrives: a skewed host still kills a grace period after the
     * press, late only by the call's time in transit.
     */
    async pressPowerButton (input) {
      const view = await onAgent(deps, input.hostId, (url) => client.pressPowerButton(url, input.vmmId, {
        killAfterMs: Math.max(0, Date.parse(input.deadline) - Date.now())
      }))
      crashPoint('press.after-agent')
      return toReport(view, input.hostId)
    },

    async rebootVmm (input) {
      const view = await onAgent(deps, input.hostId, (url) => client.rebootVmm(url, input.vmmId))
      crashPoint('reboot.after-agent')
      return toReport(view, input.hostId)
    },

    /** What the agent knows of the VMM now; `null` when it has no record of it. */
    async describeVmm (input) {
      const view = await onAgent(deps, input.hostId, (url) => client.findVmm(url, input.vmmId))
      return view === null ? null : toReport(view, input.hostId)
    },

    /**
     * Removes a destroyed instance's disks and seed from the storage every host mounts, through
     * any active host's agent (its last VMM's host first). Called once its VMMs are confirmed
     * gone. `nothing-made` when no VMM of it ever ran (no file was made); `deferred` when no host
     * is active: the files are then left to the reconciler, which reaps storage no live record
     * owns once a host is back.
     */
    async releaseInstanceStorage (input) {
      const { lastHostId, diskIds } = await storageOf(deps.pool, input.instanceId)
      if (lastHostId === null) return 'nothing-made'
      const hostId = await activeHostPreferring(deps.pool, lastHostId)
      if (hostId === null) return 'deferred'
      await onAgent(deps, hostId, async (url) => {
        for (const diskId of diskIds) await client.removeStored(url, 'disks', diskId)
        await client.removeStored(url, 'seeds', input.instanceId)
      })
      return 'released'
    },

    /** Kills and cleans up the VMM; `null` when the agent has no record of it (it is gone). */
    async destroyVmm (input) {
      const view = await onAgent(deps, input.hostId, (url) => client.destroyVmm(url, input.vmmId))
      crashPoint('destroy.after-agent')
      return view === null ? null : toReport(view, input.hostId)
    }
  }
}

/**
 * What the agent is asked to run: the spec, each interface with its network's VNI and way out,
 * and the instance's firewall policy, looked up here rather than carried in the workflow's history
 * (`PlannedVmmSpec`): the rules are the current ones when the VMM is made. An interface with no
 * row cannot be: it was inserted with the instance, before any workflow asked for a VMM.
 */
async function ensureRequest (pool: Pool, instanceId: string, instanceName: string, spec: PlannedVmmSpec): Promise<EnsureVmmRequest> {
  const policy = (await policiesOf(pool, [instanceId])).get(instanceId)!
  return { instanceId, instanceName, spec: await withSegments(pool, spec), policy }
}

async function withSegments (pool: Pool, spec: PlannedVmmSpec): Promise<VmmSpec> {
  const { interfaces, ...rest } = spec
  if (interfaces === undefined) return rest
  const segments = await segmentsOfInterfaces(pool, interfaces.map((nic) => nic.id))
  return {
    ...rest,
    interfaces: interfaces.map((nic) => {
      const segment = segments.get(nic.id)
      if (segment === undefined) throw new Error(`interface ${nic.id} has no row: its network's segment is unknown`)
      return { ...nic, ...segment }
    })
  }
}

/** How long a placement waits for the agent to make its VMM before leaving it to `ensureVmm`. */
export const PLACED_BOOT_TIMEOUT_MS = 5_000

/**
 * The boot a placement asks for (`PlacementRequest.boot`, workflows/start.ts step 3): once the
 * placement has committed, and only when the instance has no other live VMM to fence first, the
 * agent is asked once, by a client whose calls end at PLACED_BOOT_TIMEOUT_MS, to make the VMM.
 * Anything but an answer (a refusal, a slow or unreachable agent) is left to the workflow's
 * `ensureVmm`, which asks again (an ensure is idempotent on the VMM's ID) and counts the failure as
 * its own: the placement stands, and this call never fails it.
 */
export async function bootPlaced (deps: AgentCallDependencies, request: PlacementRequest, placement: PlacementResult): Promise<PlacementResult> {
  if (request.boot === undefined || !placement.placed) return placement
  const { vmmId, hostId, snapshot } = placement
  if (snapshot.liveVmms.some((vmm) => vmm.id !== vmmId)) return { ...placement, booted: null }
  const agentUrl = await agentUrlOf(deps.pool, hostId)
  if (agentUrl === null) return { ...placement, booted: null }
  let view: VmmView
  try {
    view = await deps.client.ensureVmm(agentUrl, vmmId, await ensureRequest(deps.pool, snapshot.instance.id, request.boot.instanceName, request.boot.spec))
  } catch (err) {
    log.info('the placed VMM\'s agent did not make it at once; ensureVmm asks again', { hostId, vmmId, error: err instanceof Error ? err.message : String(err) })
    return { ...placement, booted: null }
  }
  await noteContactWorked(deps.pool, hostId)
  crashPoint('ensure.after-agent')
  return { ...placement, booted: toReport(view, hostId) }
}

/** An agent's view of a VMM, as the report it stands for. */
export function toReport (view: VmmView, hostId: string): VmmReport {
  return {
    vmmId: view.id,
    instanceId: view.instanceId,
    hostId,
    state: view.state,
    generation: view.generation,
    observedAt: view.updatedAt,
    reason: view.reason,
    exit: view.exit,
    unresponsiveSince: view.unresponsiveSince,
    migration: view.migration
  }
}
