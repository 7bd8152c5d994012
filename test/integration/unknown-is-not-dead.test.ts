/**
 * I2, unknown is not dead: losing contact with a host (its network cut, or its agent answering
 * 503, or not answering at all) never fails an instance; it shows as `HostUnreachable` and
 * operations wait it out. Only a positive signal fails a VMM: a crash does, with the exit code; a
 * guest that powers itself off ends `stopped`. A failed instance is started again by a user. What
 * the control plane makes of a VMM's end (restart policy `on-failure`, backing off in a crash
 * loop; a stop of a failed instance) is test/workflows/auto-restart.test.ts's: here, that real
 * VMMs' ends reach it as those signals.
 *
 * A host is lost the way hosts are: its agent runs on, and the network between it and the control
 * plane is cut (test/helpers/partition.ts), both ways or one way only. The agent then still keeps
 * a stop's deadline it was given before the cut, alone: its kill is timed against the deadline by
 * the VMM process's exit.
 */
import assert from 'node:assert/strict'
import { readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { eventsOf, hostOf, newInstance, runningInstance, vmmProcesses, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { CUTS, cutHost, healHost } from '../helpers/partition.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'
import { writeFileAtomic } from '../../host-agent/store/record-store.js'
import { waitForExit } from '../../stack/processes.js'
import { waitFor, waitUntil } from '../../stack/wait.js'

const UNREACHABLE_AFTER_SECONDS = 3
/** The grace period of the stop the agent is given before the cut: time to cut before it ends. */
const DEADLINE_GRACE_SECONDS = 4
/** How late after its deadline the agent may kill a VMM: its timer, the SIGKILL, the exit seen (every 50 ms). */
const KILL_BOUND_MS = 1000

describe('unknown is not dead', () => {
  let stack: TestStack
  before(async () => {
    // One host, so every instance is on the host the faults are done to.
    stack = await startStack({
      hosts: 1,
      env: {
        VMPLANE_HOST_UNREACHABLE_SECONDS: String(UNREACHABLE_AFTER_SECONDS),
        VMPLANE_HEARTBEAT_SECONDS: '1',
        VMPLANE_VMM_PING_SECONDS: '1',
        // Reports held back by a cut go out soon after it heals, not at a backoff grown through it.
        VMPLANE_REPORT_RETRY_MAX_SECONDS: '2',
        VMPLANE_FAULT_INJECTION: '1',
        VMPLANE_RESTART_BACKOFF_SECONDS: '1',
        VMPLANE_RESTART_BACKOFF_MAX_SECONDS: '8'
      }
    })
  })
  after(async () => { await stack?.stop() })

  const host = (): TestStack['info']['hosts'][number] => stack.info.hosts[0]
  const faultFile = (): string => join(host().stateDir, 'fault')

  /**
   * Makes the agent answer with `fault` (host-agent/http/fault-injection.ts), written whole (a new
   * file renamed over the old): the agent reads the file on every request, and `writeFile`
   * truncates before it writes, so a read between the two found it empty, no fault, and let a call
   * through (run 68: a stop meant to wait on a hung agent reached it and ended).
   */
  async function injectFault (fault: '503' | 'hang'): Promise<void> {
    await writeFileAtomic(host().stateDir, 'fault', fault)
  }

  async function get (id: string): Promise<InstanceBody> {
    return (await api(stack).get<InstanceBody>(`/v1/instances/${id}`)).body
  }

  /** Watches instances until stopped; the states each one was seen in. */
  function watch (ids: string[]): { stop: () => Promise<Map<string, Set<string>>> } {
    const seen = new Map(ids.map((id) => [id, new Set<string>()]))
    const done = new AbortController()
    const loop = (async () => {
      while (!done.signal.aborted) {
        for (const id of ids) seen.get(id)!.add((await get(id)).state)
        await sleep(150)
      }
    })()
    return { stop: async () => { done.abort(); await loop; return seen } }
  }

  async function stopped (name: string): Promise<InstanceBody> {
    const { body } = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', { ...newInstance(name), start: false })
    return await waitForState(stack, body.instance.id, 'stopped')
  }

  /** The stop deadline the agent holds for a VMM, once its record in the host's state directory has one. */
  async function agentStopDeadline (vmmId: string): Promise<number> {
    return await waitFor(`the agent holding a stop deadline for VMM ${vmmId}`, async () => {
      const record = JSON.parse(await readFile(join(host().stateDir, 'vmms', vmmId, 'record.json'), 'utf8')) as { stopDeadline: string | null }
      return record.stopDeadline === null ? null : Date.parse(record.stopDeadline)
    }, { timeoutMs: 10_000, intervalMs: 50 })
  }

  const unreachable = (i: InstanceBody): boolean => i.conditions.some((c) => c.type === 'HostUnreachable')

  for (const cut of CUTS) {
    // Cut off this way, the host still reports to Temporal: only calls to it fail.
    const reports = cut === 'drop-incoming'
    it(`a host cut off (${cut}): nothing fails, HostUnreachable shows, the agent kills at a stop's deadline alone, and a start and a stop asked meanwhile complete once it heals`, async () => {
      const [running, early, stopping, starting] = await Promise.all([
        runningInstance(stack, `${cut}-running`),
        runningInstance(stack, `${cut}-early`, 'sim.ignore_power_button'),
        runningInstance(stack, `${cut}-stopping`, 'sim.ignore_power_button'),
        stopped(`${cut}-starting`)
      ])
      const watcher = watch([running.id, early.id, stopping.id, starting.id])
      try {
        // A stop the agent takes before the cut: the deadline is then the agent's to keep.
        assert.equal((await api(stack).post(`/v1/instances/${early.id}/stop`, { graceSeconds: DEADLINE_GRACE_SECONDS })).status, 202)
        const deadline = await agentStopDeadline(early.vmm!.id)
        const [earlyVmm] = await vmmProcesses(stack, early.vmm!)
        assert.ok(earlyVmm !== undefined, 'the VMM runs')
        await cutHost(stack, host().id, cut)
        try {
          assert.ok(Date.now() < deadline, 'the host is cut off before the deadline')
          // Asked before the host is known to be unreachable, so the start is placed on it.
          assert.equal((await api(stack).post(`/v1/instances/${starting.id}/start`)).status, 202)
          assert.equal((await api(stack).post(`/v1/instances/${stopping.id}/stop`, { graceSeconds: 1 })).status, 202)

          assert.ok(await waitForExit(earlyVmm, deadline - Date.now() + 5000), 'the agent killed the VMM')
          const lateMs = Date.now() - deadline
          console.log(`${cut}: the agent's kill ended the VMM ${lateMs} ms after its deadline`)
          assert.ok(lateMs >= 0 && lateMs <= KILL_BOUND_MS, `killed ${lateMs} ms after the deadline`)

          const shown = await waitForInstance(stack, running.id, unreachable, 30_000)
          assert.equal(shown.state, 'running', 'the last known state stays')
          // Shown for calls that fail, or for heartbeats that stopped: the host's status says which.
          if (reports) assert.equal((await hostOf(stack, host().id))?.status, 'active', 'its heartbeats still arrive')
          else await waitUntil('the host marked unreachable', async () => (await hostOf(stack, host().id))?.status === 'unreachable', { timeoutMs: 15_000 })
          assert.equal((await get(starting.id)).state, 'starting')
          const stillStopping = await get(stopping.id)
          assert.equal(stillStopping.state, 'stopping')
          assert.ok(unreachable(stillStopping))
          // The VMM's exit is a positive signal, and it reaches Temporal if the host can report.
          if (reports) await waitForState(stack, early.id, 'stopped', 15_000)
          else assert.equal((await get(early.id)).state, 'stopping', 'its end is not known while the host is cut off')
        } finally {
          await healHost(stack, host().id)
        }
        await waitForState(stack, starting.id, 'running', 60_000)
        await waitForState(stack, stopping.id, 'stopped', 60_000)
        const ended = await waitForState(stack, early.id, 'stopped', 60_000)
        assert.equal((ended.vmm?.exit as { cause: string } | null)?.cause, 'stop-deadline', 'killed by the agent at its deadline')
        const back = await waitForInstance(stack, running.id, (i) => i.conditions.length === 0, 30_000)
        assert.equal(back.state, 'running')
      } finally {
        const seen = await watcher.stop()
        for (const [id, states] of seen) assert.ok(!states.has('failed'), `${id} read failed: ${[...states].join(', ')}`)
      }
      const messages = (await eventsOf(stack, running.id)).map((e) => e.message)
      if (reports) {
        assert.ok(!messages.some((m) => /no heartbeat since/.test(m)), `its heartbeats went on arriving: ${JSON.stringify(messages)}`)
      } else {
        assert.ok(messages.some((m) => /unreachable: no heartbeat since/.test(m)), JSON.stringify(messages))
        assert.ok(messages.some((m) => /is heard from again/.test(m)), JSON.stringify(messages))
      }
    })
  }

  it('an agent answering 503, then not answering at all: operations wait, HostUnreachable shows, nothing fails', async () => {
    const running = await runningInstance(stack, 'faulty-running')
    const starting = await stopped('faulty-starting')
    const stopping = await runningInstance(stack, 'faulty-stopping', 'sim.ignore_power_button')
    const watcher = watch([running.id, starting.id, stopping.id])
    await injectFault('503')
    try {
      assert.equal((await api(stack).post(`/v1/instances/${starting.id}/start`)).status, 202)
      assert.equal((await api(stack).post(`/v1/instances/${stopping.id}/stop`, { graceSeconds: 1 })).status, 202)
      const unreachable = await waitForInstance(stack, stopping.id, (i) => i.conditions.some((c) => c.type === 'HostUnreachable'), 30_000)
      assert.equal(unreachable.state, 'stopping')
      // The condition shows once the failures are old enough; the event is written by the first
      // failed call after that, which the 503s go on producing.
      await waitFor('the unreachable event', async () =>
        (await eventsOf(stack, stopping.id)).some((e) => /calls to its agent have failed since/.test(e.message)) ? true : null,
      { timeoutMs: 30_000 })
      await injectFault('hang')
      await sleep(4000)
      assert.equal((await get(starting.id)).state, 'starting')
      assert.equal((await get(stopping.id)).state, 'stopping')
    } finally {
      await rm(faultFile(), { force: true })
    }
    await waitForState(stack, starting.id, 'running', 60_000)
    await waitForState(stack, stopping.id, 'stopped', 60_000)
    await waitForInstance(stack, stopping.id, (i) => !i.conditions.some((c) => c.type === 'HostUnreachable'), 30_000)
    const seen = await watcher.stop()
    for (const [id, states] of seen) assert.ok(!states.has('failed'), `${id} read failed: ${[...states].join(', ')}`)
    assert.equal((await get(running.id)).state, 'running')
    const messages = (await eventsOf(stack, stopping.id)).map((e) => e.message)
    assert.ok(messages.some((m) => /calls to its agent have failed since/.test(m)), JSON.stringify(messages))
    // The first call that works again tells the instances on the host then: the one starting is
    // (its ensure is such a call); the one stopping may have been recorded stopped a moment
    // before, from the agent's own report of its kill at the deadline.
    const told = [...(await eventsOf(stack, starting.id)), ...(await eventsOf(stack, stopping.id))].map((e) => e.message)
    assert.ok(told.some((m) => /agent answers again/.test(m)), JSON.stringify(told))
  })

  it('a VMM whose API stops answering is VmmUnresponsive, still running', async () => {
    const instance = await runningInstance(stack, 'unresponsive', 'sim.hang_api_after_ms=300')
    const unresponsive = await waitForInstance(stack, instance.id, (i) => i.conditions.some((c) => c.type === 'VmmUnresponsive'), 30_000)
    assert.equal(unresponsive.state, 'running')
    // The condition comes with the VMM's record; the event is the workflow's next write.
    let messages: string[] = []
    await waitFor('the unresponsive event', async () => {
      messages = (await eventsOf(stack, instance.id)).map((e) => e.message)
      return messages.some((m) => /VMM API unresponsive since/.test(m)) ? true : null
    }, { timeoutMs: 15_000, detail: () => JSON.stringify(messages) })
    assert.equal((await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds: 1 })).status, 202)
    await waitForState(stack, instance.id, 'stopped')
  })

  it('a crash with restart policy never fails the instance with the exit code; it starts again and runs', async () => {
    const instance = await runningInstance(stack, 'crashes-once', 'sim.crash_after_ms=300 sim.exit_code=7')
    const failed = await waitForState(stack, instance.id, 'failed')
    assert.deepEqual(failed.lastError && [failed.lastError.code, failed.lastError.message], ['VmmCrashed', 'VMM exited with code 7'])
    assert.equal(failed.vmm?.state, 'failed')
    await sleep(2000)
    assert.equal((await get(instance.id)).state, 'failed', 'policy never: no restart')
    assert.equal((await api(stack).post(`/v1/instances/${instance.id}/start`)).status, 202)
    // The same kernel command line crashes again, so this shows the start itself: a new VMM ran.
    const restarted = await waitForInstance(stack, instance.id, (i) => i.vmm !== null && i.vmm.id !== failed.vmm!.id && i.vmm.state === 'running')
    assert.notEqual(restarted.vmm!.id, failed.vmm!.id)
  })

  it('a guest that powers itself off ends stopped, not failed, and is not restarted', async () => {
    const { body } = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', {
      ...newInstance('powers-off', 'sim.poweroff_ms=500'), restartPolicy: 'on-failure'
    })
    const done = await waitForInstance(stack, body.instance.id, (i) => i.state === 'stopped')
    assert.equal(done.intendedState, 'stopped')
    assert.equal(done.lastError, null)
    assert.equal(done.vmm?.exit && (done.vmm.exit as { cause: string }).cause, 'guest-poweroff')
    await sleep(2000)
    assert.equal((await get(body.instance.id)).state, 'stopped')
  })
})
