/**
 * The boot a placement asks for (activities/host-agent-calls.ts `bootPlaced`): asked of the agent
 * only for a placed VMM with nothing to fence first, and never failing the placement: whatever
 * is not an answer is left to the workflow's `ensureVmm`. The agent client and the host's row are
 * doubles; the real call is test/faults' and test/integration's.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MockActivityEnvironment } from '@temporalio/testing'
import { bootPlaced, type AgentCallDependencies } from '../../../activities/host-agent-calls.js'
import type { PlacementRequest, PlacementResult } from '../../../contract/records.js'
import type { VmmView } from '../../../domain/host-agent-api.js'
import { HostAgentError } from '../../../domain/errors.js'
import type { Instance } from '../../../domain/instance.js'
import type { VmmRecord } from '../../../domain/vmm.js'

const NOW = '2026-11-27T10:00:00.000Z'

function vmm (id: string): VmmRecord {
  return { id, instanceId: 'i-1', hostId: 'host-1', state: 'starting', generation: 0, reason: null, exit: null, unresponsiveSince: null, runningSince: null, migration: null, createdAt: NOW, updatedAt: NOW, destroyedAt: null }
}

function placement (liveVmmIds: string[]): PlacementResult {
  const instance = { id: 'i-1', name: 'web-1' } as Instance
  return { placed: true, vmmId: 'vmm-new', hostId: 'host-1', snapshot: { instance, liveVmms: liveVmmIds.map(vmm), activeVmm: vmm('vmm-new') } }
}

const REQUEST = {
  operationId: 'op-1',
  vcpus: 1,
  memoryMiB: 256,
  change: {} as PlacementRequest['change'],
  boot: { instanceName: 'web-1', spec: { vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' } } }
} as PlacementRequest

/** Dependencies whose agent answers `ensure`'s way; the calls it got, in order. */
function agentThat (ensure: () => Promise<VmmView>) {
  const calls: Array<{ url: string, vmmId: string, instanceName: string }> = []
  const pool = {
    query: async (sql: string) => sql.includes('SELECT agent_url')
      ? { rows: [{ agent_url: 'http://agent-1' }], rowCount: 1 }
      // The instance's firewall policy (db/firewall-rules.ts `policiesOf`): no rule, at generation 1.
      : sql.includes('FROM firewall_generation')
        ? { rows: [{ kind: 'generation', generation: 1 }], rowCount: 1 }
        : { rows: [], rowCount: 0 }
  }
  const client = {
    ensureVmm: async (url: string, vmmId: string, request: { instanceName: string }) => {
      calls.push({ url, vmmId, instanceName: request.instanceName })
      return await ensure()
    }
  }
  return { calls, deps: { pool, client, unreachableAfterMs: 60_000 } as unknown as AgentCallDependencies }
}

const STARTING: VmmView = { id: 'vmm-new', instanceId: 'i-1', state: 'starting', generation: 1, updatedAt: NOW, reason: null, exit: null, unresponsiveSince: null, migration: null } as unknown as VmmView

/** `bootPlaced` as the worker runs it: in an activity's context (its log is the activity's). */
async function boot (deps: AgentCallDependencies, request: PlacementRequest, placed: PlacementResult): Promise<PlacementResult> {
  return await new MockActivityEnvironment().run(bootPlaced, deps, request, placed)
}

describe('a placement\'s boot', () => {
  it('asks the agent once for a VMM with nothing to fence, and answers with its report', async () => {
    const { calls, deps } = agentThat(async () => STARTING)
    const result = await boot(deps, REQUEST, placement(['vmm-new']))
    assert.deepEqual(calls, [{ url: 'http://agent-1', vmmId: 'vmm-new', instanceName: 'web-1' }])
    assert.ok(result.placed)
    assert.deepEqual([result.booted?.vmmId, result.booted?.hostId, result.booted?.state, result.booted?.generation], ['vmm-new', 'host-1', 'starting', 1])
  })

  it('does not ask while another VMM of the instance lives: the workflow fences it first', async () => {
    const { calls, deps } = agentThat(async () => STARTING)
    const result = await boot(deps, REQUEST, placement(['vmm-old', 'vmm-new']))
    assert.deepEqual(calls, [])
    assert.ok(result.placed)
    assert.equal(result.booted, null)
  })

  it('leaves a refusal, an unreachable agent and a timeout to ensureVmm: the placement stands', async () => {
    for (const failure of [new HostAgentError('InvalidRequest', 'no room for the disks', 422), new HostAgentError('HostUnreachable', 'connect ECONNREFUSED'), new DOMException('The operation was aborted due to timeout', 'TimeoutError')]) {
      const { calls, deps } = agentThat(async () => { throw failure })
      const result = await boot(deps, REQUEST, placement(['vmm-new']))
      assert.equal(calls.length, 1)
      assert.ok(result.placed)
      assert.equal(result.booted, null, failure.message)
      assert.equal(result.vmmId, 'vmm-new')
    }
  })

  it('changes nothing of a placement that asked for no boot, or placed nothing', async () => {
    const { calls, deps } = agentThat(async () => STARTING)
    const { boot: asked, ...withoutBoot } = REQUEST
    assert.ok(asked !== undefined)
    const placed = placement(['vmm-new'])
    assert.equal(await boot(deps, withoutBoot, placed), placed)
    const refused: PlacementResult = { placed: false, code: 'NoCapacity', reason: 'no room', snapshot: placed.snapshot }
    assert.equal(await boot(deps, REQUEST, refused), refused)
    assert.deepEqual(calls, [])
  })
})
