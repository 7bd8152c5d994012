/**
 * Reports and heartbeats reach a real Temporal server by signalWithStart, on the workflow IDs,
 * types and search attributes of the control plane's contract; they are retried while Temporal
 * is down, without holding up the HTTP API or a stop; and a restarted agent sends every live
 * VMM's state again. Nothing processes the workflows: the test reads the signals from their histories.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { HostAnnouncement } from '../../domain/host.js'
import { hostWorkflowId, instanceWorkflowId } from '../../domain/ids.js'
import type { VmmReport } from '../../domain/vmm.js'
import { WORKFLOW_TYPES } from '../../contract/workflows.js'
import { HostIdKey, InstanceIdKey, OperationKey } from '../../contract/search-attributes.js'
import { waitFor } from '../../stack/wait.js'
import { ensureBody, newVmmId, TestAgent } from './helpers/agent.js'
import { buildSimulator, tempDir } from './helpers/simulator.js'
import { TestTemporal } from './helpers/temporal.js'

let dir: { dir: string, remove: () => Promise<void> }
let temporal: TestTemporal
let agent: TestAgent

before(async () => {
  await buildSimulator()
  dir = await tempDir('vmp-rep-')
  temporal = await TestTemporal.start(dir.dir)
  agent = await TestAgent.create({ temporalAddress: temporal.address })
  await agent.start()
})

after(async () => {
  await agent?.cleanup()
  await temporal?.kill()
  await dir?.remove()
})

async function reports (instanceId: string): Promise<VmmReport[]> {
  const signals = await temporal.signals(instanceWorkflowId(instanceId)).catch(() => [])
  return signals.filter((s) => s.name === 'vmmReport').map((s) => s.args[0] as VmmReport)
}

async function waitForReport (instanceId: string, what: string, accept: (report: VmmReport) => boolean): Promise<VmmReport> {
  return await waitFor(`a report of ${what}`, async () => (await reports(instanceId)).find(accept) ?? null, {
    timeoutMs: 20_000,
    intervalMs: 200,
    detail: async () => JSON.stringify(await reports(instanceId))
  })
}

describe('reports to Temporal', () => {
  const id = newVmmId()
  const body = ensureBody('sim.shutdown_ms=50') as { instanceId: string }

  it('heartbeats register the host on its monitor workflow', async () => {
    const beat = await waitFor('a heartbeat', async () => {
      const signals = await temporal.signals(hostWorkflowId('host-test')).catch(() => [])
      return signals.find((s) => s.name === 'hostHeartbeat') ?? null
    }, { timeoutMs: 20_000, intervalMs: 200 })
    const announcement = beat.args[0] as HostAnnouncement
    assert.equal(announcement.hostId, 'host-test')
    assert.equal(announcement.agentUrl, agent.url)
    assert.ok(announcement.capacity.vcpus > 0)
    const description = await (await temporal.client()).workflow.getHandle(hostWorkflowId('host-test')).describe()
    assert.equal(description.type, WORKFLOW_TYPES.host)
    assert.deepEqual(description.typedSearchAttributes.get(HostIdKey), 'host-test')
  })

  it('reports every state of a VMM after its boot, which the ensure answers, to its instance workflow, with generations', async () => {
    const created = await agent.request('PUT', `/v1/vmms/${id}`, body)
    assert.deepEqual([created.body.state, created.body.generation], ['running', 2])
    const rebooted = await agent.request('POST', `/v1/vmms/${id}/reboot`)
    assert.equal(rebooted.status, 200)
    const running = await waitFor('the VM running again', async () => {
      const view = await agent.request('GET', `/v1/vmms/${id}`)
      return view.body.state === 'running' && view.body.generation > rebooted.body.generation ? view.body : null
    }, { timeoutMs: 20_000, intervalMs: 100 })
    const report = await waitForReport(body.instanceId, 'running', (r) => r.state === 'running' && r.generation === running.generation)
    assert.deepEqual(report, {
      vmmId: id,
      instanceId: body.instanceId,
      hostId: 'host-test',
      state: 'running',
      generation: running.generation,
      observedAt: running.updatedAt,
      reason: running.reason,
      exit: null,
      unresponsiveSince: null,
      migration: null
    })
    const handle = (await temporal.client()).workflow.getHandle(instanceWorkflowId(body.instanceId))
    const description = await handle.describe()
    assert.equal(description.type, WORKFLOW_TYPES.reports)
    assert.equal(description.typedSearchAttributes.get(InstanceIdKey), body.instanceId)
    assert.equal(description.typedSearchAttributes.get(HostIdKey), 'host-test')
    assert.equal(description.typedSearchAttributes.get(OperationKey), 'reports')
    const generations = (await reports(body.instanceId)).map((r) => r.generation)
    assert.deepEqual(generations, [...generations].sort((a, b) => a - b), 'in generation order')
    assert.ok(generations[0]! > 2, `the answer's generations 1 and 2 are not sent again: ${generations.join(', ')}`)
  })

  it('reports `running` when the boot outlasted the wait of the ensure\'s answer', async () => {
    const slow = { id: newVmmId(), body: ensureBody('sim.boot_ms=4000') as { instanceId: string } }
    const created = await agent.request('PUT', `/v1/vmms/${slow.id}`, slow.body)
    assert.deepEqual([created.body.state, created.body.generation], ['starting', 1])
    const report = await waitForReport(slow.body.instanceId, 'running', (r) => r.state === 'running')
    assert.equal(report.generation, 2)
    await agent.request('DELETE', `/v1/vmms/${slow.id}`)
  })

  it('keeps working while Temporal is down, and delivers the reports once it is back', async () => {
    await temporal.kill()
    const pressed = await agent.request('POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 30_000 })
    assert.equal(pressed.status, 200)
    const destroyed = await agent.waitForState(id, 'destroyed')
    assert.equal(destroyed.exit?.cause, 'guest-poweroff')
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await temporal.restart()
    const report = await waitForReport(body.instanceId, 'destroyed', (r) => r.state === 'destroyed')
    assert.equal(report.generation, destroyed.generation)
    assert.deepEqual(report.exit, destroyed.exit)
  })

  it("a restarted agent sends every live VMM's current state again", async () => {
    const live = { id: newVmmId(), body: ensureBody() as { instanceId: string } }
    // Answered `running`, which the outbox then did not send: the restart sends it.
    const created = await agent.request('PUT', `/v1/vmms/${live.id}`, live.body)
    assert.equal(created.body.state, 'running')
    const before = (await reports(live.body.instanceId)).filter((r) => r.state === 'running').length
    await agent.kill('SIGKILL')
    await agent.start()
    await waitFor('the running state reported again', async () => {
      const count = (await reports(live.body.instanceId)).filter((r) => r.state === 'running').length
      return count > before ? count : null
    }, { timeoutMs: 20_000, intervalMs: 200 })
    await agent.request('DELETE', `/v1/vmms/${live.id}`)
  })
})
