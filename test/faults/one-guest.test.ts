/**
 * Moving VMs keeps every promise (issue 25's acceptance), on real processes: real Temporal,
 * PostgreSQL, host agents on a LAN of their own, simulated VMMs.
 *
 * The lost acknowledgement: the target completes and runs the VM while the source never hears so,
 * and Cloud Hypervisor resumes the source too (`sim.migration_fail_at=ack`). How long the guest
 * ran twice is read from the source's own event file, which the VMM writes with timestamps from
 * its own start: from its `vm resumed` after `migration-failed` (the target runs the VM throughout)
 * to its agent's `vm paused`. So the window is measured exactly, and whether or not anything can
 * reach the source's host: 20 migrations with every host reachable, then 20 with the source's host
 * cut off from the LAN (the control plane, Temporal, the other hosts) once the send is under way;
 * the migration's stream, on a Unix socket in the storage every host mounts, still flows, as it
 * would over a storage network. Only the source's agent can act then, and the bound must hold.
 *
 * A host declared lost at any moment of a boot, a stop, a reboot or a migration: its agent frozen
 * (the host unreachable, its VMMs running on), the host declared lost (through the instance's
 * workflow, or the host's) and a stop asked for, in either order: the stop ends within its grace
 * period plus 15 s. The host is readmitted after
 * each, as the runbook says.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { waitFor } from '../../stack/wait.js'
import { startFaultStack } from '../helpers/fault-stack.js'
import { DOUBLE_RUN_BOUND_MS } from '../helpers/guest-sampler.js'
import { hostOf, newInstance, vmmProcesses, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { temporalCli } from '../helpers/operator.js'
import { cutHost, healHost } from '../helpers/partition.js'
import { api, type TestStack } from '../helpers/stack.js'

const RUNS = 20
/** A stop's bound beyond its grace period once the host is declared lost (the acceptance). */
const LOST_STOP_BOUND_MS = 15_000
const STOP_GRACE_SECONDS = 5
/** A migration that takes some 4 s, so that a host can be lost in the middle of it. */
const SLOW = 'sim.migration_mib_per_s=64 sim.migration_dirty_mib_per_s=8'
/** Some 1 s: time enough to cut the source's host off once its agent took the send. */
const UNHURRIED = 'sim.migration_mib_per_s=256 sim.migration_dirty_mib_per_s=8'

interface Migration { id: string, phase: string, source: { vmmId: string, hostId: string, phase: string | null }, target: { vmmId: string, hostId: string } | null }
type Instance = InstanceBody & { migration: Migration | null }

describe('the guest runs in one place, and a lost host never hangs a stop', { timeout: 20 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startFaultStack(3, { VMPLANE_HEARTBEAT_SECONDS: '1', VMPLANE_HOST_UNREACHABLE_SECONDS: '5', VMPLANE_REPORT_RETRY_MAX_SECONDS: '2' }) })
  after(async () => { await stack?.stop() })

  async function running (name: string, cmdline: string): Promise<Instance> {
    const created = await api(stack).post<{ instance: Instance }>('/v1/instances', newInstance(name, `console=ttyS0 ${cmdline}`))
    assert.equal(created.status, 202, JSON.stringify(created.body))
    return await waitForState(stack, created.body.instance.id, 'running') as Instance
  }

  function stateDirOf (hostId: string): string {
    return stack.info.hosts.find((h) => h.id === hostId)!.stateDir
  }

  /** How long the source ran the guest after its send failed: from its resume to its agent's pause; null until both show. */
  async function runTwiceMs (source: { vmmId: string, hostId: string }): Promise<number | null> {
    const text = await readFile(join(stateDirOf(source.hostId), 'vmms', source.vmmId, 'events'), 'utf8').catch(() => '')
    const events = text.split('\n\n').filter((chunk) => chunk.trim() !== '').map((chunk) => JSON.parse(chunk) as { timestamp: { secs: number, nanos: number }, event: string })
    const failed = events.findIndex((e) => e.event === 'migration-failed')
    if (failed < 0) return null
    const after = events.slice(failed)
    const resumed = after.find((e) => e.event === 'resumed')
    const paused = after.find((e) => e.event === 'paused')
    if (resumed === undefined || paused === undefined) return null
    const at = (e: { timestamp: { secs: number, nanos: number } }): number => e.timestamp.secs * 1000 + e.timestamp.nanos / 1e6
    return at(paused) - at(resumed)
  }

  async function migrated (instance: Instance): Promise<{ source: { vmmId: string, hostId: string }, moved: Instance }> {
    const source = { vmmId: instance.vmm!.id, hostId: instance.vmm!.hostId }
    const answer = await api(stack).post<{ operation: { status: string } }>(`/v1/instances/${instance.id}/migrate?wait=60`)
    assert.equal(answer.status, 200, JSON.stringify(answer.body))
    assert.equal(answer.body.operation.status, 'succeeded', 'the target has the VM: it wins')
    const moved = await waitForState(stack, instance.id, 'running') as Instance
    assert.notEqual(moved.vmm!.hostId, source.hostId)
    assert.deepEqual(await vmmProcesses(stack, { id: source.vmmId, hostId: source.hostId }), [], 'the source is gone')
    return { source, moved }
  }

  function summary (windows: number[]): string {
    const sorted = [...windows].sort((a, b) => a - b)
    return `min ${sorted[0]!.toFixed(1)} ms, median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms over ${sorted.length}`
  }

  it(`a lost acknowledgement: the guest runs twice at most ${DOUBLE_RUN_BOUND_MS} ms, ${RUNS} times`, async () => {
    let instance = await running('ack-lost', 'sim.migration_fail_at=ack')
    const windows: number[] = []
    for (let run = 0; run < RUNS; run++) {
      const { source, moved } = await migrated(instance)
      windows.push(await waitFor('the source\'s resume and its agent\'s pause', async () => await runTwiceMs(source), { timeoutMs: 10_000 }))
      instance = moved
    }
    console.log(`the guest ran twice for: ${summary(windows)}`)
    assert.ok(windows.every((ms) => ms <= DOUBLE_RUN_BOUND_MS), windows.join(', '))
  })

  it(`a lost acknowledgement with the source's host cut off: its agent alone holds the guest, at most ${DOUBLE_RUN_BOUND_MS} ms, ${RUNS} times`, async () => {
    let instance = await running('ack-lost-cut', `sim.migration_fail_at=ack ${UNHURRIED}`)
    const windows: number[] = []
    for (let run = 0; run < RUNS; run++) {
      const source = { vmmId: instance.vmm!.id, hostId: instance.vmm!.hostId }
      assert.equal((await api(stack).post(`/v1/instances/${instance.id}/migrate`)).status, 202)
      // The source's agent took the send (its half is `sending`): the VM's memory flows for some 1 s.
      await waitForInstance(stack, instance.id, (i) => (i as Instance).migration?.source.phase === 'sending')
      await cutHost(stack, source.hostId, 'link-down')
      try {
        windows.push(await waitFor('the source\'s resume and its agent\'s pause', async () => await runTwiceMs(source), { timeoutMs: 30_000 }))
        // The control plane records the commit while the source's host is away.
        const committed = await waitForInstance(stack, instance.id, (i) => (i as Instance).migration?.phase === 'committed') as Instance
        assert.notEqual(committed.vmm!.hostId, source.hostId, 'the target is the active VMM')
      } finally {
        await healHost(stack, source.hostId)
      }
      instance = await waitForInstance(stack, instance.id, (i) => i.state === 'running' && i.operation === null, 60_000) as Instance
      assert.notEqual(instance.vmm!.hostId, source.hostId)
      await waitFor('the held source killed once its host answers', async () => (await vmmProcesses(stack, { id: source.vmmId, hostId: source.hostId })).length === 0 ? true : null, { timeoutMs: 30_000 })
    }
    console.log(`with the source's host cut off, the guest ran twice for: ${summary(windows)}`)
    assert.ok(windows.every((ms) => ms <= DOUBLE_RUN_BOUND_MS), windows.join(', '))
  })

  /**
   * Freezes the host's agent (the host unreachable, its VMMs running on), and stops the instance
   * with the host declared lost before the stop or while it waits on the host (`order`); returns
   * how far past its grace the stop ended (the instance `stopped`, nothing in flight).
   */
  async function stopAfterHostLost (instance: Instance, hostId: string, order: 'before the stop' | 'while the stop waits'): Promise<number> {
    const agent = `agent-${hostId}`
    // Before the stop, to the instance's own workflow (the runbook's other way); while it waits, to the host's.
    const declare = async (): Promise<void> => {
      if (order === 'before the stop') await temporalCli(stack, 'workflow', 'signal', '-w', `instance-${instance.id}`, '--name', 'declareHostLost', '--input', JSON.stringify({ hostId }))
      else await temporalCli(stack, 'workflow', 'signal', '-w', `host-${hostId}`, '--name', 'declareHostLost')
    }
    await stack.kill(agent, 'SIGSTOP')
    try {
      if (order === 'before the stop') {
        await declare()
        await waitFor(`host ${hostId} lost`, async () => (await hostOf(stack, hostId))?.status === 'lost' ? true : null, { timeoutMs: 30_000 })
      }
      const askedAt = Date.now()
      const stop = await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds: STOP_GRACE_SECONDS })
      // 200: the loss ended the operation, and the instance is stopped already.
      assert.ok(stop.status === 202 || stop.status === 200, JSON.stringify(stop.body))
      if (order === 'while the stop waits') {
        await waitForInstance(stack, instance.id, (i) => i.state === 'stopping')
        await declare()
      }
      await waitFor('the stop to end', async () => {
        const now = (await api(stack).get<Instance>(`/v1/instances/${instance.id}`)).body
        // At rest with nothing in flight: `failed` too, for an instance the loss failed before the stop came.
        return (now.state === 'stopped' || now.state === 'failed') && now.operation === null ? true : null
      }, { timeoutMs: STOP_GRACE_SECONDS * 1000 + 60_000, intervalMs: 100 })
      return Date.now() - askedAt - STOP_GRACE_SECONDS * 1000
    } finally {
      await stack.kill(agent, 'SIGCONT')
      await waitFor('the returning agent kills the fenced VMMs', async () => (await vmmProcesses(stack, instance.vmm!)).length === 0 ? true : null, { timeoutMs: 30_000 })
      // As the runbook says: readmitted once its agent has killed every fenced VMM; asked again until then.
      await waitFor(`host ${hostId} active again`, async () => {
        if ((await hostOf(stack, hostId))?.status === 'active') return true
        await temporalCli(stack, 'workflow', 'signal', '-w', `host-${hostId}`, '--name', 'readmitHost')
        return null
      }, { timeoutMs: 30_000, intervalMs: 1000 })
    }
  }

  for (const order of ['before the stop', 'while the stop waits'] as const) {
    it(`a stop ends within its grace plus ${LOST_STOP_BOUND_MS / 1000} s when its host is declared lost ${order}, during a boot, a stop, a reboot or a migration`, async () => {
      const overshoots: Record<string, number> = {}
      const name = (moment: string): string => `lost-${moment}-${order.startsWith('before') ? 'b' : 'w'}`

      const created = await api(stack).post<{ instance: Instance }>('/v1/instances', newInstance(name('boot'), 'console=ttyS0 sim.boot_ms=60000'))
      const booting = await waitForInstance(stack, created.body.instance.id, (i) => i.state === 'starting' && i.vmm !== null && i.vmm.state === 'starting') as Instance
      overshoots.boot = await stopAfterHostLost(booting, booting.vmm!.hostId, order)

      const stopping = await running(name('stop'), 'sim.ignore_power_button')
      assert.equal((await api(stack).post(`/v1/instances/${stopping.id}/stop`, { graceSeconds: 600 })).status, 202)
      await waitForInstance(stack, stopping.id, (i) => i.state === 'stopping')
      overshoots.stop = await stopAfterHostLost(stopping, stopping.vmm!.hostId, order)

      const rebooting = await running(name('reboot'), 'sim.reboot_ms=60000')
      assert.equal((await api(stack).post(`/v1/instances/${rebooting.id}/reboot`)).status, 202)
      await waitForInstance(stack, rebooting.id, (i) => i.state === 'rebooting')
      overshoots.reboot = await stopAfterHostLost(rebooting, rebooting.vmm!.hostId, order)

      const migrating = await running(name('migration'), SLOW)
      assert.equal((await api(stack).post(`/v1/instances/${migrating.id}/migrate`)).status, 202)
      await waitForInstance(stack, migrating.id, (i) => (i as Instance).migration?.source.phase === 'sending')
      overshoots.migration = await stopAfterHostLost(migrating, migrating.vmm!.hostId, order)

      console.log(`host declared lost ${order}: past the grace period, the stops ended after (ms): ${JSON.stringify(overshoots)}`)
      for (const [moment, ms] of Object.entries(overshoots)) assert.ok(ms <= LOST_STOP_BOUND_MS, `the stop during a ${moment} ended ${ms} ms past its grace`)
    })
  }
})
