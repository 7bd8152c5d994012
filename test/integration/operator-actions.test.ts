/**
 * What operators do with the real `temporal` and `tctl` binaries on the instance's workflow ID:
 * ask what it is doing (`state` query), force it down now (`forceStop`), and fence a host that
 * is gone (`declareHostLost`), whose agent, once heard from again, kills what was fenced. With a
 * host frozen (SIGSTOP), a stop stays `stopping` with `HostUnreachable` — never `stopped` on a
 * guess, never `failed` — and completes when the host returns. An instance whose disks a VMM on a
 * host declared lost still holds cannot run a second VMM on them: the disk lock refuses it.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { instanceWorkflowId } from '../../domain/ids.js'
import { waitUntil } from '../../stack/wait.js'
import { DISKLESS, eventsOf, hostOf, runningInstance, stuckStopping, vmmProcesses, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { temporalCli, tctl } from '../helpers/operator.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const UNREACHABLE_AFTER_SECONDS = 3

describe('operator actions', () => {
  let stack: TestStack
  before(async () => {
    stack = await startStack({
      env: { VMPLANE_HOST_UNREACHABLE_SECONDS: String(UNREACHABLE_AFTER_SECONDS), VMPLANE_HEARTBEAT_SECONDS: '1' }
    })
  })
  after(async () => { await stack?.stop() })

  it('answers the state query with temporal and with tctl', async () => {
    const instance = await stuckStopping(stack, 'queried')
    const fromTemporal = JSON.parse(await temporalCli(stack, 'workflow', 'query', '-w', instanceWorkflowId(instance.id), '--name', 'state', '-o', 'json'))
    const state = fromTemporal.queryResult[0]
    assert.equal(state.operation, 'stop')
    assert.equal(state.state, 'stopping')
    assert.equal(state.vmmId, instance.vmm!.id)
    assert.ok(Date.parse(state.stopDeadline) > Date.now() + 500_000)
    // tctl prints a `Query result:` line, then the results as JSON.
    const fromTctl = await tctl(stack, 'workflow', 'query', '-w', instanceWorkflowId(instance.id), '--qt', 'state')
    assert.match(fromTctl, /^Query result:\n/)
    assert.deepEqual(JSON.parse(fromTctl.slice(fromTctl.indexOf('\n') + 1))[0], state)
    await temporalCli(stack, 'workflow', 'signal', '-w', instanceWorkflowId(instance.id), '--name', 'forceStop')
    await waitForState(stack, instance.id, 'stopped')
  })

  for (const [tool, signal] of [
    ['temporal', (s: TestStack, id: string) => temporalCli(s, 'workflow', 'signal', '-w', instanceWorkflowId(id), '--name', 'forceStop', '--input', '{"reason":"on-call"}')],
    ['tctl', (s: TestStack, id: string) => tctl(s, 'workflow', 'signal', '-w', instanceWorkflowId(id), '-n', 'forceStop', '-i', '{"reason":"on-call"}')]
  ] as const) {
    it(`forceStop with ${tool} kills a stuck stop at once`, async () => {
      const instance = await stuckStopping(stack, `forced-${tool}`)
      const started = Date.now()
      await signal(stack, instance.id)
      const stopped = await waitForState(stack, instance.id, 'stopped')
      assert.ok(Date.now() - started < 10_000, 'long before its 600 s grace period')
      assert.deepEqual(stopped.lastError && [stopped.lastError.code, stopped.lastError.message], ['StopForced', 'forced by on-call; VMM killed'])
      assert.deepEqual(await vmmProcesses(stack, instance.vmm!), [])
      const messages = (await eventsOf(stack, instance.id)).map((e) => e.message)
      assert.ok(messages.includes('force-stop by on-call: VMM killed without waiting for the guest'), JSON.stringify(messages))
    })
  }

  it('forceStop with temporal signal-with-start stops an instance no execution is running for', async () => {
    const instance = await runningInstance(stack, 'idle-forced', 'sim.ignore_power_button')
    await waitForInstance(stack, instance.id, (i) => i.operation === null)
    await temporalCli(stack, 'workflow', 'signal-with-start', '--workflow-id', instanceWorkflowId(instance.id),
      '--type', 'applyVmmReports', '--task-queue', stack.info.taskQueue, '--input', JSON.stringify({ instanceId: instance.id }),
      '--signal-name', 'forceStop')
    const stopped = await waitForState(stack, instance.id, 'stopped')
    assert.equal(stopped.lastError?.code, 'StopForced')
  })

  it('a stop during a host freeze stays stopping with HostUnreachable, never stopped or failed, and completes when the host returns', async () => {
    const instance = await runningInstance(stack, 'frozen-host', 'sim.ignore_power_button')
    const agent = `agent-${instance.vmm!.hostId}`
    await stack.kill(agent, 'SIGSTOP')
    try {
      assert.equal((await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds: 1 })).status, 202)
      const seen: string[] = []
      // The stop is recorded, and the host shown unreachable, in either order (the condition
      // depends only on the clock); both must hold together.
      const unreachable = await waitForInstance(stack, instance.id, (i) => {
        seen.push(i.state)
        return i.state !== 'running' && i.conditions.some((c) => c.type === 'HostUnreachable')
      }, 30_000)
      assert.equal(unreachable.state, 'stopping')
      await new Promise((resolve) => setTimeout(resolve, 3000))
      const still = (await api(stack).get<InstanceBody>(`/v1/instances/${instance.id}`)).body
      seen.push(still.state)
      assert.equal(still.state, 'stopping', 'long past its grace period, the stop still waits for the host')
      assert.ok(seen.every((s) => s === 'running' || s === 'stopping'), `never stopped or failed on a guess: ${seen.join(', ')}`)
    } finally {
      await stack.kill(agent, 'SIGCONT')
    }
    const stopped = await waitForState(stack, instance.id, 'stopped', 60_000)
    assert.equal(stopped.lastError?.code, 'StopForced')
    assert.deepEqual(stopped.conditions.filter((c) => c.type === 'HostUnreachable'), [])
    assert.deepEqual(await vmmProcesses(stack, instance.vmm!), [])
  })

  for (const tool of ['temporal', 'tctl'] as const) {
    it(`declareHostLost with ${tool} fences the host: the stop completes, and the returning agent kills the VMM`, async () => {
      // Without disks: what may start elsewhere at once is the next case's subject.
      const instance = await runningInstance(stack, `lost-${tool}`, 'sim.ignore_power_button', DISKLESS)
      const { hostId } = instance.vmm!
      const agent = `agent-${hostId}`
      const other = await runningInstance(stack, `bystander-${tool}`, '', DISKLESS)
      await stack.kill(agent, 'SIGSTOP')
      try {
        assert.equal((await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds: 600 })).status, 202)
        await waitForInstance(stack, instance.id, (i) => i.state === 'stopping')
        const input = JSON.stringify({ hostId })
        if (tool === 'temporal') await temporalCli(stack, 'workflow', 'signal', '-w', instanceWorkflowId(instance.id), '--name', 'declareHostLost', '--input', input)
        else await tctl(stack, 'workflow', 'signal', '-w', instanceWorkflowId(instance.id), '-n', 'declareHostLost', '-i', input)
        const stopped = await waitForState(stack, instance.id, 'stopped')
        assert.equal(stopped.vmm?.state, 'lost')
        assert.equal(stopped.lastError?.code, 'HostLost')
        assert.equal((await vmmProcesses(stack, instance.vmm!)).length, 1, 'the VMM may still run on the lost host')
        assert.equal((await hostOf(stack, hostId))?.status, 'lost')
        // Fenced, so the instance may start again at once, on another host, while the old VMM may still run.
        assert.equal((await api(stack).post(`/v1/instances/${instance.id}/start`)).status, 202)
        const restarted = await waitForState(stack, instance.id, 'running')
        assert.notEqual(restarted.vmm?.hostId, hostId)
        if (other.vmm!.hostId === hostId) {
          const failed = await waitForState(stack, other.id, 'failed')
          assert.equal(failed.lastError?.code, 'HostLost')
        }
      } finally {
        await stack.kill(agent, 'SIGCONT')
      }
      await waitUntil('the returning agent killed the fenced VMM', async () => (await vmmProcesses(stack, instance.vmm!)).length === 0, { timeoutMs: 30_000 })
      // The host comes back only when an operator says so.
      await temporalCli(stack, 'workflow', 'signal', '-w', `host-${hostId}`, '--name', 'readmitHost')
      await waitUntil(`host ${hostId} active again`, async () => (await hostOf(stack, hostId))?.status === 'active', { timeoutMs: 30_000 })
    })
  }

  it("declareHostLost of a host still running an instance's VMM: its disks stay locked, so a start elsewhere fails until that VMM is gone, then starts", async () => {
    const instance = await runningInstance(stack, 'lost-with-disks', 'sim.ignore_power_button')
    const { hostId } = instance.vmm!
    const agent = `agent-${hostId}`
    await stack.kill(agent, 'SIGSTOP')
    try {
      assert.equal((await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds: 600 })).status, 202)
      await waitForInstance(stack, instance.id, (i) => i.state === 'stopping')
      await temporalCli(stack, 'workflow', 'signal', '-w', instanceWorkflowId(instance.id), '--name', 'declareHostLost', '--input', JSON.stringify({ hostId }))
      await waitForState(stack, instance.id, 'stopped')
      assert.equal((await vmmProcesses(stack, instance.vmm!)).length, 1, 'the old VMM still runs on the host declared lost, holding its disks')
      assert.equal((await api(stack).post(`/v1/instances/${instance.id}/start`)).status, 202)
      const refused = await waitForInstance(stack, instance.id, (i) => i.operation === null && i.lastError?.code === 'BootFailed')
      assert.equal(refused.state, 'stopped')
      assert.match(refused.lastError!.message, /Cannot lock images of all block devices/, 'the disk lock keeps a second VMM off the disks')
    } finally {
      await stack.kill(agent, 'SIGCONT')
    }
    await waitUntil('the returning agent killed the fenced VMM', async () => (await vmmProcesses(stack, instance.vmm!)).length === 0, { timeoutMs: 30_000 })
    assert.equal((await api(stack).post(`/v1/instances/${instance.id}/start`)).status, 202)
    const restarted = await waitForState(stack, instance.id, 'running')
    assert.notEqual(restarted.vmm?.hostId, hostId)
    await temporalCli(stack, 'workflow', 'signal', '-w', `host-${hostId}`, '--name', 'readmitHost')
    await waitUntil(`host ${hostId} active again`, async () => (await hostOf(stack, hostId))?.status === 'active', { timeoutMs: 30_000 })
  })
})
