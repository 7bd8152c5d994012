/**
 * Live migration on a real stack (issue 17's acceptance): real Temporal, PostgreSQL, host agents
 * in network namespaces of their own, and simulated VMMs that send and receive the VM.
 *
 * - A migration through the API: the target runs, the source's process is gone, the instance has
 *   one VMM, and the guest carries on on the target: its console answers with the same prompt,
 *   it printed no second boot, and its disk was not booted again.
 * - A cancel before the commit point: the target is killed and the source keeps running.
 * - A stop while the VM is sent, and one racing the commit point: both VMMs are gone and the
 *   instance reads `stopped` within its grace period plus the bound. (A stop at each phase,
 *   each of the workflow's paths, is in test/workflows/migration.test.ts.)
 * - A drain: the host is cordoned, its instances run elsewhere, and it takes no new VMM.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import WebSocket from 'ws'
import { waitFor } from '../../stack/wait.js'
import { eventsOf, newInstance, vmmProcesses, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

/** The bound a stop keeps beyond its grace period (README, stop overshoot), generously. */
const STOP_BOUND_MS = 10_000
/** A migration slow enough to be caught at each phase: about 4 s of precopy for 256 MiB. */
const SLOW = 'sim.migration_mib_per_s=64 sim.migration_dirty_mib_per_s=8'

interface Migration {
  id: string
  phase: string
  source: { vmmId: string, hostId: string, phase: string | null }
  target: { vmmId: string, hostId: string, phase: string | null } | null
  progress: { memoryIterations: number }
  reason: string | null
}

type Instance = InstanceBody & { migration: Migration | null }

describe('live migration', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 3, env: { VMPLANE_HOST_VCPUS: '64' } }) })
  after(async () => { await stack?.stop() })

  async function running (name: string, cmdline = ''): Promise<Instance> {
    const created = await api(stack).post<{ instance: Instance }>('/v1/instances', newInstance(name, `console=ttyS0 ${cmdline}`))
    assert.equal(created.status, 202, JSON.stringify(created.body))
    return await waitForState(stack, created.body.instance.id, 'running') as Instance
  }

  async function migrate (instance: Instance, body: Record<string, unknown> = {}, query = ''): Promise<{ status: number, body: { instance: Instance, operation: { id: string, status: string, error: { code: string } | null } } }> {
    return await api(stack).post(`/v1/instances/${instance.id}/migrate${query}`, body)
  }

  async function consoleLog (id: string): Promise<string> {
    const response = await fetch(`${stack.info.apiUrl}/v1/instances/${id}/console/log`, { headers: { authorization: `Bearer ${stack.info.apiToken}` } })
    return await response.text()
  }

  /** Types a line on the instance's console and returns what came back once `pattern` shows. */
  async function typeOnConsole (id: string, line: string, pattern: RegExp): Promise<string> {
    const socket = new WebSocket(`${stack.info.apiUrl.replace(/^http/, 'ws')}/v1/instances/${id}/console`, { headers: { authorization: `Bearer ${stack.info.apiToken}` } })
    let screen = ''
    socket.on('message', (data: Buffer) => { screen += data.toString('utf8') })
    try {
      await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
      socket.send(Buffer.from(`${line}\r`))
      return await waitFor(`the console to answer ${pattern}`, async () => pattern.test(screen) ? screen : null, { timeoutMs: 10_000, detail: () => screen.slice(-300) })
    } finally {
      socket.close()
    }
  }

  it('moves a running instance to another host: one VMM, on the target, and the guest carries on', async () => {
    const instance = await running('mig-1', 'sim.mark_disk=1')
    await waitFor('the login prompt', async () => /mig-1 login: $/.test(await consoleLog(instance.id)) ? true : null, { timeoutMs: 20_000 })
    const source = instance.vmm!
    const answer = await migrate(instance, {}, '?wait=60')
    assert.equal(answer.status, 200, JSON.stringify(answer.body))
    assert.equal(answer.body.operation.status, 'succeeded', JSON.stringify(answer.body.operation))

    const moved = await waitForState(stack, instance.id, 'running') as Instance
    assert.notEqual(moved.vmm!.hostId, source.hostId)
    assert.notEqual(moved.vmm!.id, source.id)
    assert.equal(moved.migration, null, 'no migration is live any more')
    assert.deepEqual(await vmmProcesses(stack, source), [], 'the source process is gone')
    assert.equal((await vmmProcesses(stack, moved.vmm!)).length, 1, 'the target runs')

    const [record] = (await api(stack).get<{ items: Migration[] }>(`/v1/instances/${instance.id}/migrations`)).body.items
    assert.equal(record.phase, 'succeeded')
    assert.equal(record.source.phase, 'finished')
    assert.equal(record.target?.phase, 'finished')
    assert.ok(record.progress.memoryIterations >= 1)
    const steps = (await eventsOf(stack, instance.id)).filter((e) => e.kind === 'migration-step').map((e) => e.message)
    assert.ok(steps.some((m) => /sending the VM/.test(m)) && steps.some((m) => /^committed/.test(m)), steps.join('\n'))

    // The guest was not booted again: its console answers with its prompt, its log on the
    // target has no boot banner, and the boot count on its disk is still 1.
    const echoed = await typeOnConsole(instance.id, 'whoami', /whoami[\r\n]+mig-1 login: /)
    assert.match(echoed, /whoami/)
    const log = await consoleLog(instance.id)
    assert.doesNotMatch(log, /Linux version|vmplane-marker boots=2/)
  })

  it('a cancel before the commit point kills the target, and the VM runs on at the source', async () => {
    const instance = await running('mig-2', SLOW)
    const source = instance.vmm!
    const accepted = await migrate(instance)
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body))
    const sending = await waitForInstance(stack, instance.id, (i) => (i as Instance).migration?.phase === 'sending') as Instance
    const target = sending.migration!.target!
    const cancel = await api(stack).post<{ operation: { status: string, error: { code: string } } }>(`/v1/instances/${instance.id}/migrate/cancel?wait=30`)
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body))
    assert.equal(cancel.body.operation.status, 'failed')
    assert.equal(cancel.body.operation.error.code, 'MigrationCancelled')

    const after = await waitForState(stack, instance.id, 'running') as Instance
    assert.equal(after.vmm!.id, source.id, 'the VM stays on its source')
    assert.deepEqual(await vmmProcesses(stack, { id: target.vmmId, hostId: target.hostId }), [], 'the target is killed')
    assert.equal((await vmmProcesses(stack, source)).length, 1, 'the source runs')
    const [record] = (await api(stack).get<{ items: Migration[] }>(`/v1/instances/${instance.id}/migrations`)).body.items
    assert.equal(record.phase, 'cancelled')
  })

  /**
   * Stops a migrating instance whose guest ignores the power button, once `caught` holds of it,
   * and checks that both VMMs are gone and the instance stopped within the grace period and the
   * bound. Returns the migration's record.
   */
  async function stopDuring (name: string, cmdline: string, caught: (i: Instance) => boolean): Promise<Migration> {
    const instance = await running(name, `${cmdline} sim.ignore_power_button`)
    const source = instance.vmm!
    assert.equal((await migrate(instance)).status, 202)
    await waitForInstance(stack, instance.id, (i) => caught(i as Instance), 30_000)
    const graceSeconds = 2
    const requestedAt = Date.now()
    const stop = await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds })
    assert.equal(stop.status, 202)
    await waitForState(stack, instance.id, 'stopped', graceSeconds * 1000 + STOP_BOUND_MS + 5000)
    const took = Date.now() - requestedAt
    assert.ok(took <= graceSeconds * 1000 + STOP_BOUND_MS, `stopped after ${took} ms`)
    const [record] = (await api(stack).get<{ items: Migration[] }>(`/v1/instances/${instance.id}/migrations`)).body.items
    assert.deepEqual(await vmmProcesses(stack, source), [], 'the source is gone')
    if (record.target !== null) assert.deepEqual(await vmmProcesses(stack, { id: record.target.vmmId, hostId: record.target.hostId }), [], 'the target is gone')
    return record
  }

  it('a stop while the VM is being sent stops both VMMs within the grace period and the bound', async () => {
    const record = await stopDuring('mig-stop-1', SLOW, (i) => i.migration?.phase === 'sending' && i.migration.progress.memoryIterations >= 1)
    assert.equal(record.phase, 'aborted', JSON.stringify(record))
  })

  it('a stop that races the commit point still stops both VMMs within the bound', async () => {
    // A fast migration, stopped as soon as it is under way: the stop may land before or after
    // the commit; either way nothing runs afterwards.
    const record = await stopDuring('mig-stop-2', '', (i) => i.migration !== null)
    assert.ok(['aborted', 'succeeded'].includes(record.phase), JSON.stringify(record))
  })

  it('a drain cordons the host and moves its running instances to the others', async () => {
    const instances = await Promise.all(['drain-1', 'drain-2', 'drain-3'].map(async (name) => await running(name)))
    const drained = instances[0]!.vmm!.hostId
    const drain = await api(stack).post<{ cordonedAt: string | null, drain: { status: string } | null }>(`/v1/hosts/${drained}/drain`, { concurrency: 2 })
    assert.equal(drain.status, 202, JSON.stringify(drain.body))
    assert.notEqual(drain.body.cordonedAt, null)
    const host = await waitFor('the drain to end', async () => {
      const { body } = await api(stack).get<{ items: Array<{ id: string, cordonedAt: string | null, drain: { status: string, migrated: number, instancesFound: number } | null }> }>('/v1/hosts')
      const found = body.items.find((h) => h.id === drained)!
      return found.drain?.status === 'drained' ? found : null
    }, { timeoutMs: 120_000, intervalMs: 500 })
    assert.equal(host.drain!.migrated, host.drain!.instancesFound)
    for (const instance of instances) {
      const now = await waitForState(stack, instance.id, 'running') as Instance
      assert.notEqual(now.vmm!.hostId, drained, `${instance.name} left ${drained}`)
    }
    // Cordoned: a new instance goes elsewhere, until the host is uncordoned.
    const fresh = await running('after-drain')
    assert.notEqual(fresh.vmm!.hostId, drained)
    const uncordoned = await api(stack).post<{ cordonedAt: string | null }>(`/v1/hosts/${drained}/uncordon`)
    assert.equal(uncordoned.status, 200)
    assert.equal(uncordoned.body.cordonedAt, null)
  })
})
