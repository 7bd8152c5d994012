/**
 * I2, unknown is not dead: losing contact with a host (frozen with SIGSTOP, or answering 503,
 * or not answering at all) never fails an instance; it shows as `HostUnreachable` and operations
 * wait it out. Only a positive signal fails a VMM: a crash does, with the exit code; a guest that
 * powers itself off ends `stopped`. Failed instances recover: started again by a user, or by
 * themselves with restart policy `on-failure`, backing off in a crash loop.
 */
import assert from 'node:assert/strict'
import { writeFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { eventsOf, newInstance, runningInstance, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'
import { waitFor } from '../../scripts/dev-stack/wait.js'

const UNREACHABLE_AFTER_SECONDS = 3

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
        VMPLANE_FAULT_INJECTION: '1',
        VMPLANE_RESTART_BACKOFF_SECONDS: '1',
        VMPLANE_RESTART_BACKOFF_MAX_SECONDS: '8'
      }
    })
  })
  after(async () => { await stack?.stop() })

  const agent = (): string => `agent-${stack.info.hosts[0].id}`
  const faultFile = (): string => join(stack.info.hosts[0].stateDir, 'fault')

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

  it('a frozen host: running stays running with HostUnreachable, a start and a stop wait it out, nothing fails', async () => {
    const running = await runningInstance(stack, 'freeze-running')
    const stopping = await runningInstance(stack, 'freeze-stopping', 'sim.ignore_power_button')
    const starting = await stopped('freeze-starting')
    const watcher = watch([running.id, stopping.id, starting.id])
    await stack.kill(agent(), 'SIGSTOP')
    try {
      // Asked before the host is known to be unreachable, so the start is placed on it.
      assert.equal((await api(stack).post(`/v1/instances/${starting.id}/start`)).status, 202)
      assert.equal((await api(stack).post(`/v1/instances/${stopping.id}/stop`, { graceSeconds: 1 })).status, 202)
      const unreachable = await waitForInstance(stack, running.id, (i) => i.conditions.some((c) => c.type === 'HostUnreachable'), 30_000)
      assert.equal(unreachable.state, 'running', 'the last known state stays')
      await sleep(2000)
      assert.equal((await get(starting.id)).state, 'starting')
      assert.equal((await get(stopping.id)).state, 'stopping')
      assert.ok((await get(stopping.id)).conditions.some((c) => c.type === 'HostUnreachable'))
    } finally {
      await stack.kill(agent(), 'SIGCONT')
    }
    await waitForState(stack, starting.id, 'running', 60_000)
    await waitForState(stack, stopping.id, 'stopped', 60_000)
    const back = await waitForInstance(stack, running.id, (i) => i.conditions.length === 0, 30_000)
    assert.equal(back.state, 'running')
    const seen = await watcher.stop()
    for (const [id, states] of seen) assert.ok(!states.has('failed'), `${id} read failed: ${[...states].join(', ')}`)
    const messages = (await eventsOf(stack, running.id)).map((e) => e.message)
    assert.ok(messages.some((m) => /unreachable: no heartbeat since/.test(m)), JSON.stringify(messages))
    assert.ok(messages.some((m) => /is heard from again/.test(m)), JSON.stringify(messages))
  })

  it('an agent answering 503, then not answering at all: operations wait, HostUnreachable shows, nothing fails', async () => {
    const running = await runningInstance(stack, 'faulty-running')
    const starting = await stopped('faulty-starting')
    const stopping = await runningInstance(stack, 'faulty-stopping', 'sim.ignore_power_button')
    const watcher = watch([running.id, starting.id, stopping.id])
    await writeFile(faultFile(), '503')
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
      await writeFile(faultFile(), 'hang')
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
    assert.ok(messages.some((m) => /agent answers again/.test(m)), JSON.stringify(messages))
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

  it('a stop of a failed instance is a cheap move to stopped', async () => {
    const instance = await runningInstance(stack, 'failed-then-stopped', 'sim.crash_after_ms=300')
    await waitForState(stack, instance.id, 'failed')
    assert.equal((await api(stack).post(`/v1/instances/${instance.id}/stop`)).status, 202)
    const done = await waitForState(stack, instance.id, 'stopped')
    assert.equal(done.lastError?.code, 'VmmCrashed', 'why it had failed is kept')
  })

  it('a crash loop with restart policy on-failure restarts with a growing backoff, shown as RestartBackoff; a stop cancels it', async () => {
    const { body } = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', {
      ...newInstance('crash-loop', 'sim.crash_after_ms=500'), restartPolicy: 'on-failure'
    })
    const id = body.instance.id
    const backingOff = await waitForInstance(stack, id, (i) => i.state === 'failed' && i.conditions.some((c) => c.type === 'RestartBackoff'))
    assert.ok(Date.parse(backingOff.conditions.find((c) => c.type === 'RestartBackoff')!.since) > Date.now() - 2000)
    const delays = async (): Promise<number[]> => (await eventsOf(stack, id))
      .map((e) => /restarting in (\d+) s/.exec(e.message)?.[1]).filter((d) => d !== undefined).map(Number)
    const start = Date.now()
    while ((await delays()).length < 3 && Date.now() - start < 60_000) await sleep(250)
    assert.deepEqual((await delays()).slice(0, 3), [1, 2, 4], 'the backoff doubles')
    const vmmsSeen = new Set((await eventsOf(stack, id)).map((e) => e.message).filter((m) => /^placed VMM/.test(m)))
    assert.ok(vmmsSeen.size >= 3, 'each restart is a fresh VMM')

    await waitForInstance(stack, id, (i) => i.state === 'failed' && i.conditions.some((c) => c.type === 'RestartBackoff'))
    assert.equal((await api(stack).post(`/v1/instances/${id}/stop`)).status, 202)
    const done = await waitForState(stack, id, 'stopped')
    assert.ok(!done.conditions.some((c) => c.type === 'RestartBackoff'))
    const placed = (await eventsOf(stack, id)).filter((e) => /^placed VMM/.test(e.message)).length
    await sleep(9000)
    assert.equal((await get(id)).state, 'stopped', 'the stop cancelled the pending restart')
    assert.equal((await eventsOf(stack, id)).filter((e) => /^placed VMM/.test(e.message)).length, placed)
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
