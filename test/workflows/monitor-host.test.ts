/**
 * A host's monitor (workflows/monitor-host.ts) in the fast layer: every heartbeat recorded; a
 * host silent past the unreachable threshold marked unreachable once, from when it was last
 * heard, and brought back by its next heartbeat; a host an operator declared lost fenced on each
 * heartbeat of its agent until readmitted; the host's lease (granted by the API) judged on its
 * own schedule, whatever heartbeats come, and a host its lease declared lost taken back when
 * heard again; and an operator's action that arrived while the previous run continued as new
 * carried into the next run and carried out. What the records
 * become is activities/'s (test/activities/host-fencing.test.ts); that losing contact changes no
 * instance is test/integration/unknown-is-not-dead.test.ts's, on real hosts.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { HostAnnouncement } from '../../domain/host.js'
import { hostWorkflowId } from '../../domain/ids.js'
import { declareHostLostSignal, hostHeartbeatSignal, readmitHostSignal } from '../../contract/messages.js'
import type { MonitorHostInput } from '../../contract/workflows.js'
import { declareAfterMs, DEFAULT_LEASE_SETTINGS } from '../../domain/host-lease.js'
import { startWorkflowEnvironment, type WorkflowEnvironment } from '../helpers/workflow-environment.js'
import { TEST_SETTINGS, until } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'monitor-host-test'
const UNREACHABLE_AFTER_MS = 1000

describe('host monitors (workflow logic)', { timeout: 60_000 }, () => {
  let env: WorkflowEnvironment
  before(async () => {
    env = await startWorkflowEnvironment(TASK_QUEUE)
    env.world.settings = { ...TEST_SETTINGS, hostUnreachableAfterMs: UNREACHABLE_AFTER_MS }
  })
  after(async () => { await env?.stop() })

  function announcement (hostId: string): HostAnnouncement {
    return { hostId, agentUrl: 'http://127.0.0.1:1', capacity: { vcpus: 8, memoryMiB: 8192 }, agentStartedAt: new Date().toISOString() }
  }

  async function monitor (hostId: string, input: Partial<MonitorHostInput> = {}) {
    return await env.client.workflow.start('monitorHost', { taskQueue: TASK_QUEUE, workflowId: hostWorkflowId(hostId), args: [{ hostId, lastAnnouncement: null, ...input }] })
  }

  /** What the monitor of `hostId` asked for, in order, without the host's name. */
  function actionsOf (hostId: string): string[] {
    return env.world.hostActions.filter((a) => a.includes(` ${hostId}`)).map((a) => a.replace(` ${hostId}`, ''))
  }

  async function heardSaying (hostId: string, action: string, times = 1): Promise<void> {
    await until(`${hostId}'s monitor to ask for ${action} ${times} time(s)`, () => actionsOf(hostId).filter((a) => a.startsWith(action)).length >= times)
  }

  it('marks a host never heard from unreachable since never; records each heartbeat; silent past the threshold again, marks it unreachable once, from when it was last heard', async () => {
    const handle = await monitor('host-a')
    await heardSaying('host-a', 'unreachable')
    await handle.signal(hostHeartbeatSignal, announcement('host-a'))
    await heardSaying('host-a', 'heartbeat')
    await heardSaying('host-a', 'unreachable', 2)
    // Left silent for another threshold and more: still marked once.
    await sleep(2 * UNREACHABLE_AFTER_MS)
    await handle.signal(hostHeartbeatSignal, announcement('host-a'))
    await heardSaying('host-a', 'heartbeat', 2)
    const actions = actionsOf('host-a')
    assert.deepEqual(actions.map((a) => a.split(' ')[0]), ['unreachable', 'heartbeat', 'unreachable', 'heartbeat'])
    assert.equal(actions[0], 'unreachable since never')
    assert.match(actions[2]!, /^unreachable since \d{4}-\d\d-\d\dT/, 'since its heartbeat, not since never')
    await handle.terminate('the test is done')
  })

  it('records the heartbeat that starts its monitor (an agent\'s signalWithStart) without waiting for the next', async () => {
    const handle = await env.client.workflow.signalWithStart('monitorHost', {
      taskQueue: TASK_QUEUE,
      workflowId: hostWorkflowId('host-s'),
      args: [{ hostId: 'host-s', lastAnnouncement: null }],
      signal: hostHeartbeatSignal,
      signalArgs: [announcement('host-s')]
    })
    await heardSaying('host-s', 'heartbeat')
    assert.deepEqual(actionsOf('host-s'), ['heartbeat'], 'recorded at once, never marked unreachable first')
    await handle.terminate('the test is done')
  })

  it('declares a host lost when an operator says so, fences on each heartbeat of its agent meanwhile, and fences no more once it is readmitted', async () => {
    const handle = await monitor('host-c')
    await handle.signal(declareHostLostSignal, { hostId: 'host-c' })
    await heardSaying('host-c', 'lost')
    await handle.signal(hostHeartbeatSignal, announcement('host-c'))
    await heardSaying('host-c', 'fence')
    await handle.signal(readmitHostSignal)
    await heardSaying('host-c', 'readmit')
    await handle.signal(hostHeartbeatSignal, announcement('host-c'))
    await heardSaying('host-c', 'heartbeat', 2)
    assert.deepEqual(actionsOf('host-c').filter((a) => !a.startsWith('unreachable')), ['lost', 'heartbeat', 'fence', 'readmit', 'heartbeat'])
    await handle.terminate('the test is done')
  })

  describe('the host\'s lease (docs/design.md §17)', () => {
    const LEASE = { ...DEFAULT_LEASE_SETTINGS, termMs: 300, watchdogMs: 100, fenceMs: 50, grantMaxAgeMs: 100 }
    before(() => { env.world.settings = { ...env.world.settings, hostUnreachableAfterMs: 60_000, lease: LEASE } })
    after(() => { env.world.settings = { ...TEST_SETTINGS, hostUnreachableAfterMs: UNREACHABLE_AFTER_MS } })

    /** A heartbeat of an agent that keeps a lease (renewed from the API, not through the monitor). */
    function leased (hostId: string): HostAnnouncement {
      return { ...announcement(hostId), lease: { watchdogMs: 100 } }
    }

    it('judges the lease once its bound could first have passed after a heartbeat, then when each judgement says; a heartbeat arms it again', async () => {
      env.world.leaseJudgements.set('host-l', [{ lost: false, judgeAgainInMs: 200 }, { lost: false, judgeAgainInMs: null }])
      const handle = await monitor('host-l')
      await handle.signal(hostHeartbeatSignal, leased('host-l'))
      await heardSaying('host-l', 'judge', 2)
      await sleep(2 * declareAfterMs(LEASE))
      assert.deepEqual(actionsOf('host-l'), ['heartbeat', 'judge: again in 200', 'judge: again in never'], 'not judged again once told never')
      await handle.signal(hostHeartbeatSignal, leased('host-l'))
      await heardSaying('host-l', 'judge', 3)
      await handle.terminate('the test is done')
    })

    it('judges on the lease\'s schedule while heartbeats keep coming: an agent may reach Temporal and not the API', async () => {
      env.world.leaseJudgements.set('host-k', [{ lost: false, judgeAgainInMs: 100 }, { lost: false, judgeAgainInMs: 100 }])
      const handle = await monitor('host-k')
      // A heartbeat every quarter of the bound, for as long as the test waits: before the monitor
      // judged whatever woke it, each heartbeat put the judgement off, and it never came.
      const beating = setInterval(() => { handle.signal(hostHeartbeatSignal, leased('host-k')).catch(() => {}) }, declareAfterMs(LEASE) / 4)
      try {
        await heardSaying('host-k', 'judge', 2)
      } finally {
        clearInterval(beating)
      }
      await handle.terminate('the test is done')
    })

    it('never judges a host whose agent keeps no lease', async () => {
      const handle = await monitor('host-o')
      await handle.signal(hostHeartbeatSignal, announcement('host-o'))
      await heardSaying('host-o', 'heartbeat')
      await sleep(2 * declareAfterMs(LEASE))
      assert.deepEqual(actionsOf('host-o'), ['heartbeat'])
      await handle.terminate('the test is done')
    })

    it('a host its lease declared lost is fenced and taken back as soon as it is heard again; one an operator declared waits for the operator', async () => {
      env.world.leaseJudgements.set('host-m', [{ lost: true, judgeAgainInMs: null }])
      const handle = await monitor('host-m')
      await handle.signal(hostHeartbeatSignal, leased('host-m'))
      await heardSaying('host-m', 'judge')
      await handle.signal(hostHeartbeatSignal, leased('host-m'))
      await heardSaying('host-m', 'readmit-by-lease')
      assert.deepEqual(actionsOf('host-m').slice(0, 5), ['heartbeat', 'judge: lost', 'heartbeat', 'fence', 'readmit-by-lease'])

      const operated = await monitor('host-n')
      await operated.signal(declareHostLostSignal, { hostId: 'host-n' })
      await heardSaying('host-n', 'lost')
      await operated.signal(hostHeartbeatSignal, leased('host-n'))
      await heardSaying('host-n', 'fence')
      assert.deepEqual(actionsOf('host-n').slice(0, 3), ['lost', 'heartbeat', 'fence'], 'still lost: no readmission')
      await handle.terminate('the test is done')
      await operated.terminate('the test is done')
    })
  })

  it('carries out an operator\'s action handed over by the run that continued as new', async () => {
    const handle = await monitor('host-9', { operatorAction: 'readmit' })
    await heardSaying('host-9', 'readmit')
    await handle.terminate('the test is done')
  })
})
