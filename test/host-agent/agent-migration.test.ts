/**
 * Live migration between two real agents and their real simulated VMMs (docs/host-agent.md,
 * Migration). Both agents use one storage directory, as hosts share their storage, and one image
 * directory, so that paths in the VM config the migration carries are valid on either. Each has
 * its own network namespace, as two hosts would, except over TCP: there the two agents share one
 * namespace (its loopback up), since the targets listen on 127.0.0.1 and separate namespaces do not
 * reach each other's loopback; those VMMs have no network interface, so no TAP name is made twice in
 * the one namespace.
 *
 * The control plane's side is played by the test, through the control plane's own client
 * (http/host-agent-client.ts): it ensures the target with `incoming`, waits for it to be
 * `ready`, and has the source send to the target's receiver URL. Agents are SIGKILLed in the middle
 * (by the test, or by themselves at the migration's crash points, faults/crash-points.ts) and
 * started again on the same directories, as a crash and a service manager would.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, afterEach, before, describe, it } from 'node:test'
import { HostAgentClient } from '../../http/host-agent-client.js'
import { HostAgentError } from '../../domain/errors.js'
import type { TapView, VmmView } from '../../domain/host-agent-api.js'
import { tapNameOf } from '../../domain/interfaces.js'
import type { MigrationHalfPhase } from '../../domain/vmm.js'
import type { CrashPoint } from '../../faults/crash-points.js'
import { runCommand } from '../../host-agent/process/command.js'
import { armCrashPlan, crashPlanFired } from '../helpers/crash-plans.js'
import { STAND_IN_BASE_IMAGE } from '../../stack/hypervisor.js'
import { waitFor, waitUntil } from '../../stack/wait.js'
import { newVmmId, TestAgent, TOKEN } from './helpers/agent.js'
import { buildSimulator, processExists, tempDir } from './helpers/simulator.js'

const client = new HostAgentClient({ token: TOKEN, timeoutMs: 20_000 })

/** A migration of 128 MiB at 128 MiB/s takes about 1.7 s (three precopy iterations): long enough to see `receiving`. */
const VISIBLE = 'sim.migration_mib_per_s=128'
/** About 4 s, as the guest dirties little: long enough to cancel, stop, or restart agents in the middle. */
const SLOW = 'sim.migration_mib_per_s=32 sim.migration_dirty_mib_per_s=1'
/** About 16 s: two agents killed and started again on a loaded machine took longer than SLOW's 4 s. */
const SLOWER = 'sim.migration_mib_per_s=8 sim.migration_dirty_mib_per_s=1'

interface Instance {
  instanceId: string
  bootDiskId: string
  dataDiskId: string
  interfaceId: string | null
  cmdline: string
}

function newInstance (cmdline: string, options: { network?: boolean } = {}): Instance {
  return {
    instanceId: randomUUID(),
    bootDiskId: randomUUID(),
    dataDiskId: randomUUID(),
    interfaceId: options.network === false ? null : randomUUID(),
    cmdline: `console=ttyS0 sim.mark_disk=1 ${cmdline}`
  }
}

function ensureBody (instance: Instance, migrationId?: string): object {
  return {
    instanceId: instance.instanceId,
    instanceName: 'web-1',
    spec: {
      vcpus: 1,
      memoryMiB: 128,
      boot: { kernel: 'vmlinux', cmdline: instance.cmdline },
      disks: [{ id: instance.bootDiskId, image: STAND_IN_BASE_IMAGE, sizeGiB: 4 }, { id: instance.dataDiskId, sizeGiB: 1 }],
      ...instance.interfaceId === null ? {} : { interfaces: [{ id: instance.interfaceId, address: '10.20.0.5/24', gateway: '10.20.0.1', vni: 4096, outbound: 'none' }] },
      cloudInit: { hostname: 'web-1', sshKeys: [] }
    },
    ...migrationId === undefined ? {} : { incoming: { migrationId } }
  }
}

/** Two hosts: the second uses the first's storage and images, and with `sameNetwork` its namespace. */
async function twoHosts (options: { sameNetwork?: boolean, env?: Record<string, string>, targetEnv?: Record<string, string> } = {}): Promise<[TestAgent, TestAgent]> {
  await buildSimulator()
  const a = await TestAgent.create({ env: { VMPLANE_HOST_ID: 'host-a', ...options.env } })
  const b = await TestAgent.create({
    env: {
      ...options.env,
      VMPLANE_HOST_ID: 'host-b',
      VMPLANE_STORAGE_DIR: a.storageDir,
      VMPLANE_IMAGE_DIR: a.imageDir,
      ...options.sameNetwork === true ? { VMPLANE_AGENT_NETNS: a.network.netns } : {},
      ...options.targetEnv
    }
  })
  await a.start()
  await b.start()
  return [a, b]
}

interface Migration {
  id: string
  source: VmmView
  target: VmmView
}

/**
 * A source running `instance` on `a`, and its target ensured on `b` and `ready`; with `crash`,
 * `b` kills itself at that point of the ensure and is started again (`crashAt`).
 */
async function prepare (a: TestAgent, b: TestAgent, instance: Instance, crash?: { runDir: string, point: CrashPoint }): Promise<Migration> {
  const source = await a.waitForState((await created(a, newVmmId(), ensureBody(instance))).id, 'running')
  await waitForLog(a, source.id, /login: $/)
  const id = randomUUID()
  const targetId = newVmmId()
  if (crash === undefined) {
    const target = await created(b, targetId, ensureBody(instance, id))
    assert.deepEqual([target.state, target.migration?.role, target.migration?.phase], ['starting', 'target', 'preparing'])
  } else {
    await crashAt(crash.runDir, b, crash.point, async () => await b.request('PUT', `/v1/vmms/${targetId}`, ensureBody(instance, id)))
  }
  return { id, source, target: await waitForPhase(b, targetId, 'ready') }
}

async function send (a: TestAgent, migration: Migration, timeoutS = 60): Promise<VmmView> {
  return await client.sendMigration(a.url, migration.source.id, {
    migrationId: migration.id,
    destinationUrl: migration.target.migration!.receiverUrl!,
    downtimeMs: 300,
    timeoutS
  })
}

function socketOf (migration: Migration): string {
  return migration.target.migration!.receiverUrl!.slice('unix:'.length)
}

async function created (agent: TestAgent, id: string, body: object): Promise<VmmView> {
  const response = await agent.request('PUT', `/v1/vmms/${id}`, body)
  assert.equal(response.status, 201, JSON.stringify(response.body))
  return response.body
}

async function waitForPhase (agent: TestAgent, id: string, phase: MigrationHalfPhase, timeoutMs = 15_000): Promise<VmmView> {
  return await agent.waitForVmm(id, `reaching migration phase ${phase}`, (view) => view.migration?.phase === phase, timeoutMs)
}

async function consoleLog (agent: TestAgent, vmmId: string): Promise<string> {
  return await client.consoleLog(agent.url, vmmId, 64 * 1024)
}

async function waitForLog (agent: TestAgent, vmmId: string, pattern: RegExp): Promise<string> {
  return await waitFor(`the serial log of ${vmmId} to match ${pattern}`, async () => {
    const log = await consoleLog(agent, vmmId)
    return pattern.test(log) ? log : null
  }, { timeoutMs: 10_000, intervalMs: 50 })
}

async function taps (agent: TestAgent): Promise<TapView[]> {
  return (await agent.request<{ items: TapView[] }>('GET', '/v1/taps')).body.items
}

async function waitGone (pid: number): Promise<void> {
  await waitUntil(`process ${pid} gone`, async () => !processExists(pid), { timeoutMs: 10_000, intervalMs: 20 })
}

async function eventsOf (agent: TestAgent, vmmId: string): Promise<string> {
  return await readFile(join(agent.vmmsDir, vmmId, 'events'), 'utf8').catch(() => '')
}

/** The VM's pauses and resumes after its send failed, in the order the VMM emitted them. */
function vmEventsAfterFailure (events: string): string[] {
  const after = events.slice(events.indexOf('"migration-failed"'))
  return [...after.matchAll(/"event": "(pausing|paused|resuming|resumed)"/g)].map((m) => m[1]!)
}

/**
 * Runs `action` with a crash plan armed (faults/crash-points.ts) that has the agent SIGKILL itself
 * at `point`, checks that it did, and starts the agent again.
 */
async function crashAt (runDir: string, agent: TestAgent, point: CrashPoint, action: () => Promise<unknown>): Promise<void> {
  const name = `agent-${agent.env.VMPLANE_HOST_ID!}`
  await writeFile(join(runDir, `${name}.pid`), String(agent.pid))
  const stack = { paths: { runDir } }
  await armCrashPlan(stack, { point, kill: name, host: agent.env.VMPLANE_HOST_ID })
  await action().catch(() => {})
  await crashPlanFired(stack, `the crash point ${point}`, 10_000)
  await agent.kill()
  await agent.start()
}

/** The status of a request the agent refuses. */
async function refusal (call: Promise<unknown>): Promise<number | null> {
  const err = await call.then(() => null, (e: unknown) => e)
  assert.ok(err instanceof HostAgentError, `expected a refusal, got ${String(err)}`)
  return err.status
}

describe('live migration over Unix sockets between two hosts', { timeout: 10 * 60_000 }, () => {
  let a: TestAgent
  let b: TestAgent
  let runDir: { dir: string, remove: () => Promise<void> }
  before(async () => {
    runDir = await tempDir('vmp-crash-')
    ;[a, b] = await twoHosts({ env: { VMPLANE_CRASH_POINTS: runDir.dir } })
  })
  // A restart test that failed half-way leaves the next test its agents.
  afterEach(async () => { for (const agent of [a, b]) if (agent.child === null) await agent.start() })
  after(async () => {
    await b?.cleanup()
    await a?.cleanup()
    await runDir?.remove()
  })

  it('moves the VM: the target reports ready, receiving, finished and runs it; the source ends migrated', async () => {
    const instance = newInstance(VISIBLE)
    const migration = await prepare(a, b, instance)
    const { receiverUrl } = migration.target.migration!
    assert.equal(receiverUrl, `unix:${join(a.storageDir, 'migrations', `${migration.id}.sock`)}`, 'the default transport: the shared storage')
    await waitForLog(a, migration.source.id, /vdb: vmplane-marker boots=1/)

    const sending = await send(a, migration)
    assert.deepEqual([sending.state, sending.migration?.role, sending.migration?.phase], ['running', 'source', 'sending'])
    const receiving = await waitForPhase(b, migration.target.id, 'receiving')
    assert.equal(receiving.state, 'starting')
    assert.ok(receiving.generation > migration.target.generation, 'each phase is a new generation, reported')
    const finished = await waitForPhase(b, migration.target.id, 'finished')
    assert.ok(finished.generation > receiving.generation)
    assert.equal(finished.state, 'running')
    assert.equal(finished.pid, migration.target.pid, 'the VM runs in the target process that received it')

    const gone = await a.waitForState(migration.source.id, 'destroyed')
    assert.deepEqual(gone.exit, { cause: 'migrated', code: 0, signal: null })
    assert.equal(gone.migration?.phase, 'finished')
    assert.ok((gone.migration?.iterations ?? 0) >= 1, `precopy iterations counted: ${gone.migration?.iterations}`)
    assert.equal(processExists(migration.source.pid!), false)
    assert.equal(existsSync(socketOf(migration)), false, "the target's socket is removed")

    const tap = tapNameOf(instance.interfaceId!)
    assert.equal((await taps(b)).find((t) => t.name === tap)?.vmmId, migration.target.id, "the TAP is in the target's namespace")
    assert.equal((await taps(a)).find((t) => t.name === tap), undefined, "and gone from the source's")

    // The console: the same guest, no new boot, and it answers on the target.
    await b.typeAtConsole(migration.target.id, 'root\r', /root\r\nweb-1 login: $/)
    const targetLog = await consoleLog(b, migration.target.id)
    assert.doesNotMatch(targetLog, /Linux version|boots=/, 'the guest did not boot again on the target')
    assert.match(targetLog, /^root\r\nweb-1 login: $/, "the target's log goes on from the migration")
    assert.match(await consoleLog(a, migration.source.id), /vdb: vmplane-marker boots=1[^]*web-1 login: $/, "the source's log has the boot")

    const metrics = async (agent: TestAgent): Promise<string> => await (await fetch(`${agent.url}/metrics`)).text()
    assert.match(await metrics(b), /^vmplane_agent_migrations_total\{[^}]*role="target",outcome="finished"[^}]*\} 1$/m)
    assert.match(await metrics(a), /^vmplane_agent_migrations_total\{[^}]*role="source",outcome="finished"[^}]*\} 1$/m)

    // The disks are the target's now: a third VMM of the instance cannot lock them.
    const third = await a.waitForState((await created(a, newVmmId(), ensureBody(instance))).id, 'failed')
    assert.match(third.reason ?? '', /lock/i, third.reason ?? '')
    // And they are the same disks: a reboot on the target counts the second boot on the data disk.
    assert.equal((await b.request('POST', `/v1/vmms/${migration.target.id}/reboot`)).status, 200)
    await waitForLog(b, migration.target.id, /vdb: vmplane-marker boots=2/)
  })

  it('is idempotent: the same incoming ensure and the same send answer the same VMM; others are refused', async () => {
    const instance = newInstance(VISIBLE)
    const migration = await prepare(a, b, instance)
    const again = await b.request('PUT', `/v1/vmms/${migration.target.id}`, ensureBody(instance, migration.id))
    assert.equal(again.status, 200)
    assert.equal(again.body.migration?.receiverUrl, migration.target.migration?.receiverUrl)
    assert.equal((await b.request('PUT', `/v1/vmms/${migration.target.id}`, ensureBody(instance, randomUUID()))).status, 409, 'another migration')
    assert.equal((await b.request('PUT', `/v1/vmms/${migration.target.id}`, ensureBody(instance))).status, 409, 'a plain boot')

    const first = await send(a, migration)
    const repeated = await send(a, migration)
    assert.equal(repeated.migration?.id, first.migration?.id)
    const other = client.sendMigration(a.url, migration.source.id, { migrationId: randomUUID(), destinationUrl: 'unix:/nowhere.sock', downtimeMs: 300, timeoutS: 60 })
    assert.equal(await refusal(other), 409, 'another migration while one is in progress')
    const changed = client.sendMigration(a.url, migration.source.id, { migrationId: migration.id, destinationUrl: 'unix:/nowhere.sock', downtimeMs: 300, timeoutS: 60 })
    assert.equal(await refusal(changed), 409, 'the same migration with other parameters')
    assert.equal(await refusal(client.rebootVmm(a.url, migration.source.id)), 409, 'no reboot of a migrating VM')
    const starting = client.sendMigration(b.url, migration.target.id, { migrationId: randomUUID(), destinationUrl: 'unix:/nowhere.sock', downtimeMs: 300, timeoutS: 60 })
    assert.equal(await refusal(starting), 409, 'a VMM that is not running sends nothing')
    assert.equal(await refusal(client.cancelMigration(a.url, migration.source.id, { migrationId: migration.id })), 409, 'a cancel of the source')
    assert.equal(await refusal(client.cancelMigration(b.url, migration.target.id, { migrationId: randomUUID() })), 409, 'a cancel of another migration')
    await a.waitForState(migration.source.id, 'destroyed')
    assert.equal((await waitForPhase(b, migration.target.id, 'finished')).state, 'running')
  })

  it('cancel before the commit point kills the target; the source runs on, its half failed', async () => {
    const migration = await prepare(a, b, newInstance(SLOW))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    const cancelled = await client.cancelMigration(b.url, migration.target.id, { migrationId: migration.id })
    assert.equal(cancelled.state, 'destroyed', 'the answer comes once the target is gone')
    assert.deepEqual(cancelled.exit, { cause: 'killed', code: null, signal: 'SIGKILL' })
    assert.deepEqual([cancelled.migration?.phase, cancelled.migration?.reason], ['failed', 'cancelled'])
    assert.equal(processExists(migration.target.pid!), false)
    assert.equal(existsSync(socketOf(migration)), false, "the target's socket is removed")
    const repeated = await client.cancelMigration(b.url, migration.target.id, { migrationId: migration.id })
    assert.deepEqual([repeated.state, repeated.generation], [cancelled.state, cancelled.generation], 'a repeat answers the same')

    const source = await waitForPhase(a, migration.source.id, 'failed', 20_000)
    assert.equal(source.state, 'running')
    assert.ok(processExists(migration.source.pid!))
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
  })

  it('cancel after the commit point is too late: the answer shows finished and nothing is killed', async () => {
    const migration = await prepare(a, b, newInstance(''))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'finished')
    const answer = await client.cancelMigration(b.url, migration.target.id, { migrationId: migration.id })
    assert.deepEqual([answer.state, answer.migration?.phase], ['running', 'finished'])
    assert.ok(processExists(migration.target.pid!))
    assert.equal((await a.waitForState(migration.source.id, 'destroyed')).exit?.cause, 'migrated')
    assert.equal((await b.vmm(migration.target.id)).state, 'running')
  })

  it('a receive that fails kills the target (single-use); the source runs on', async () => {
    const migration = await prepare(a, b, newInstance('sim.migration_fail_at=memory'))
    await send(a, migration)
    const target = await b.waitForState(migration.target.id, 'failed')
    assert.equal(target.exit?.cause, 'boot-failed')
    assert.equal(target.migration?.phase, 'failed')
    assert.match(target.reason ?? '', /receive failed/)
    assert.equal(processExists(migration.target.pid!), false)
    // Refused before the downtime: the VM never left, and runs on without a pause.
    const source = await waitForPhase(a, migration.source.id, 'failed')
    assert.equal(source.state, 'running')
    assert.equal(source.migration?.reason, 'Cloud Hypervisor reported migration-failed')
    assert.deepEqual(vmEventsAfterFailure(await eventsOf(a, migration.source.id)), [])
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
  })

  it('when the acknowledgement of Complete is lost, pauses the source Cloud Hypervisor resumed, and holds it for the control plane', async () => {
    const migration = await prepare(a, b, newInstance('sim.migration_fail_at=ack'))
    await send(a, migration)
    const target = await waitForPhase(b, migration.target.id, 'finished')
    const source = await waitForPhase(a, migration.source.id, 'held')
    assert.deepEqual([target.state, source.state], ['running', 'running'])
    assert.match(source.reason ?? '', /paused here until the control plane says which side has it/)
    assert.deepEqual(vmEventsAfterFailure(await eventsOf(a, migration.source.id)), ['resuming', 'resumed', 'pausing', 'paused'],
      'Cloud Hypervisor resumed the VM, and the agent paused it at once')
    // The target has the VM: the control plane kills the source (here, by hand).
    assert.equal((await a.request('POST', `/v1/vmms/${migration.source.id}/migration/resume`, { migrationId: randomUUID() })).status, 409)
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
    assert.equal((await b.request('DELETE', `/v1/vmms/${migration.target.id}`)).status, 200)
  })

  it('holds a source whose target refused Complete, and resumes it when told the target does not have the VM', async () => {
    const migration = await prepare(a, b, newInstance('sim.migration_fail_at=complete'))
    assert.equal((await a.request('POST', `/v1/vmms/${migration.source.id}/migration/resume`, { migrationId: migration.id })).status, 409, 'only a held source resumes')
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'failed')
    const held = await waitForPhase(a, migration.source.id, 'held')
    assert.equal(held.state, 'running')
    const resumed = await client.resumeHeldSource(a.url, migration.source.id, { migrationId: migration.id })
    assert.deepEqual([resumed.state, resumed.migration?.phase], ['running', 'failed'])
    assert.match(resumed.reason ?? '', /its target does not have the VM: resumed here/)
    assert.deepEqual(vmEventsAfterFailure(await eventsOf(a, migration.source.id)), ['resuming', 'resumed', 'pausing', 'paused', 'resuming', 'resumed'])
    const again = await client.resumeHeldSource(a.url, migration.source.id, { migrationId: migration.id })
    assert.equal(again.migration?.phase, 'failed', 'a retried resume finds it done')
    await waitForLog(a, migration.source.id, /login: $/)
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
  })

  it('a source agent down when the send fails past the downtime pauses the VM when it comes back', async () => {
    const migration = await prepare(a, b, newInstance(`sim.migration_fail_at=ack ${SLOW}`))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    await a.kill()
    await waitUntil('the send failed on the source', async () => (await eventsOf(a, migration.source.id)).includes('"migration-failed"'),
      { timeoutMs: 30_000, intervalMs: 50 })
    await a.start()
    const held = await waitForPhase(a, migration.source.id, 'held')
    assert.equal(held.state, 'running')
    assert.deepEqual(vmEventsAfterFailure(await eventsOf(a, migration.source.id)), ['resuming', 'resumed', 'pausing', 'paused'])
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
    assert.equal((await b.request('DELETE', `/v1/vmms/${migration.target.id}`)).status, 200)
  })

  it('a stop with a short deadline kills source and target mid-migration at the deadline', async () => {
    const migration = await prepare(a, b, newInstance(SLOW))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    const started = Date.now()
    for (const [agent, id] of [[a, migration.source.id], [b, migration.target.id]] as const) {
      assert.equal((await client.pressPowerButton(agent.url, id, { killAfterMs: 1000 })).state, 'stopping')
    }
    const source = await a.waitForState(migration.source.id, 'destroyed')
    assert.equal(source.exit?.cause, 'stop-deadline')
    assert.equal(source.migration?.phase, 'failed')
    // The target is killed at its deadline, or a moment before it when its sender's kill at the
    // same deadline ends its receive (a target is single-use): either way, by the deadline.
    const target = await b.waitForVmm(migration.target.id, 'killed', (view) => view.state === 'destroyed' || view.state === 'failed', 10_000)
    assert.ok(target.exit?.cause === 'stop-deadline' || /receive failed/.test(target.reason ?? ''), JSON.stringify(target))
    assert.equal(target.migration?.phase, 'failed')
    assert.ok(Date.now() - started < 4000, `both killed by the deadline (${Date.now() - started} ms)`)
    for (const pid of [migration.source.pid!, migration.target.pid!]) assert.equal(processExists(pid), false)
  })

  it('a delete kills a target mid-receive as any VMM; the source runs on', async () => {
    const migration = await prepare(a, b, newInstance(SLOW))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    const deleted = await client.destroyVmm(b.url, migration.target.id)
    assert.deepEqual([deleted?.state, deleted?.exit?.cause, deleted?.migration?.phase], ['destroyed', 'killed', 'failed'])
    assert.equal(existsSync(socketOf(migration)), false, "the target's socket is removed")
    assert.equal((await waitForPhase(a, migration.source.id, 'failed', 20_000)).state, 'running')
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
  })

  it('both agents SIGKILLed mid-migration and restarted at once: the new agents follow it to its end', async () => {
    const migration = await prepare(a, b, newInstance(SLOWER))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    await Promise.all([a.kill(), b.kill()])
    await Promise.all([a.start(), b.start()])
    assert.equal((await b.vmm(migration.target.id)).migration?.phase, 'receiving', 'still under way')
    assert.equal((await waitForPhase(b, migration.target.id, 'finished', 40_000)).state, 'running')
    assert.equal((await a.waitForState(migration.source.id, 'destroyed')).exit?.cause, 'migrated')
    assert.equal((await b.vmm(migration.target.id)).pid, migration.target.pid, 'adopted, not started again')
  })

  it('agents restarted after a migration finished while they were down: target running, source migrated', async () => {
    const migration = await prepare(a, b, newInstance(SLOW))
    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    await Promise.all([a.kill(), b.kill()])
    await waitGone(migration.source.pid!)
    await Promise.all([a.start(), b.start()])
    const source = await a.vmm(migration.source.id)
    assert.deepEqual([source.state, source.exit?.cause, source.migration?.phase], ['destroyed', 'migrated', 'finished'])
    const target = await b.waitForState(migration.target.id, 'running')
    assert.equal(target.migration?.phase, 'finished')
  })

  it('agents restarted after a migration failed while they were down: the source runs on, the target is killed', async () => {
    const migration = await prepare(a, b, newInstance('sim.migration_stall_after=1'))
    await send(a, migration, 3)
    await waitForPhase(b, migration.target.id, 'receiving')
    await Promise.all([a.kill(), b.kill()])
    await waitUntil('the migration failed on the source', async () => (await eventsOf(a, migration.source.id)).includes('"migration-failed"'),
      { timeoutMs: 20_000, intervalMs: 100 })
    await Promise.all([a.start(), b.start()])
    const source = await waitForPhase(a, migration.source.id, 'failed')
    assert.equal(source.state, 'running')
    const target = await b.waitForState(migration.target.id, 'failed')
    assert.equal(target.migration?.phase, 'failed')
    assert.equal(processExists(migration.target.pid!), false)
    assert.equal((await a.request('DELETE', `/v1/vmms/${migration.source.id}`)).status, 200)
  })

  it('agents killed after the target spawned and after the send: the restarted agents issue the receive and carry the migration through', async () => {
    const migration = await prepare(a, b, newInstance(VISIBLE), { runDir: runDir.dir, point: 'agent.migration.after-target-spawn' })
    assert.equal((await b.vmmProcesses()).filter((p) => p.pid === migration.target.pid).length, 1, 'the receive was issued to the VMM spawned before the crash')
    await crashAt(runDir.dir, a, 'agent.migration.after-send', async () => await send(a, migration))
    const retried = await send(a, migration)
    assert.equal(retried.migration?.id, migration.id, 'a retried send finds the first one')
    assert.equal((await waitForPhase(b, migration.target.id, 'finished')).state, 'running')
    assert.equal((await a.waitForState(migration.source.id, 'destroyed')).exit?.cause, 'migrated')
  })

  it('the target\'s agent killed once it listens: the restarted agent waits out the receive it lost and sees it finish', async () => {
    const migration = await prepare(a, b, newInstance(VISIBLE), { runDir: runDir.dir, point: 'agent.migration.after-receive' })
    await send(a, migration)
    assert.equal((await waitForPhase(b, migration.target.id, 'finished')).state, 'running')
    assert.equal((await a.waitForState(migration.source.id, 'destroyed')).exit?.cause, 'migrated')
    assert.equal((await b.vmm(migration.target.id)).pid, migration.target.pid)
  })

  it('a send Cloud Hypervisor refuses is failed at once and the VM runs on; another send then migrates it', async () => {
    const migration = await prepare(a, b, newInstance(''))
    const refused = await client.sendMigration(a.url, migration.source.id, { migrationId: randomUUID(), destinationUrl: 'tcp:[::1:6000', downtimeMs: 300, timeoutS: 60 })
    assert.deepEqual([refused.state, refused.migration?.phase], ['running', 'failed'])
    assert.match(refused.migration?.reason ?? '', /Missing closing/)
    await send(a, migration)
    assert.equal((await a.waitForState(migration.source.id, 'destroyed')).exit?.cause, 'migrated')
    assert.equal((await b.waitForState(migration.target.id, 'running')).migration?.phase, 'finished')
  })

  it('an incoming ensure whose disks are missing fails without a process, and makes no disk', async () => {
    const instance = newInstance('')
    const failed = await created(b, newVmmId(), ensureBody(instance, randomUUID()))
    assert.deepEqual([failed.state, failed.pid, failed.exit?.cause, failed.migration?.phase], ['failed', null, 'boot-failed', 'failed'])
    assert.match(failed.reason ?? '', new RegExp(`disk ${instance.bootDiskId} and disk ${instance.dataDiskId} and the cloud-init seed of instance ${instance.instanceId} not found`))
    assert.equal(existsSync(join(b.storageDir, 'disks', `${instance.bootDiskId}.qcow2`)), false)
    assert.equal(existsSync(join(b.storageDir, 'seeds', `${instance.instanceId}.img`)), false)
  })
})

describe('live migration over TCP', { timeout: 5 * 60_000 }, () => {
  let a: TestAgent
  let b: TestAgent
  before(async () => {
    [a, b] = await twoHosts({ sameNetwork: true, targetEnv: { VMPLANE_MIGRATION_LISTEN: 'tcp:127.0.0.1:47100-47101' } })
    await runCommand('ip', ['-n', a.network.netns, 'link', 'set', 'lo', 'up'])
  })
  after(async () => {
    await b?.cleanup()
    await a?.cleanup()
  })

  it('moves the VM through a port of the range, a port per target still receiving', async () => {
    const migration = await prepare(a, b, newInstance(VISIBLE, { network: false }))
    const other = await prepare(a, b, newInstance('', { network: false }))
    const urls = [migration.target.migration?.receiverUrl, other.target.migration?.receiverUrl]
    assert.deepEqual(urls.sort(), ['tcp:127.0.0.1:47100', 'tcp:127.0.0.1:47101'])
    const third = newInstance('', { network: false })
    const refused = await b.request('PUT', `/v1/vmms/${newVmmId()}`, ensureBody(third, randomUUID()))
    assert.equal(refused.status, 503, 'every port is held')

    await send(a, migration)
    await waitForPhase(b, migration.target.id, 'receiving')
    assert.equal((await waitForPhase(b, migration.target.id, 'finished')).state, 'running')
    assert.equal((await a.waitForState(migration.source.id, 'destroyed')).exit?.cause, 'migrated')
    assert.doesNotMatch(await consoleLog(b, migration.target.id), /Linux version/)
    await send(a, other)
    assert.equal((await a.waitForState(other.source.id, 'destroyed')).exit?.cause, 'migrated')
    assert.equal((await b.waitForState(other.target.id, 'running')).migration?.phase, 'finished')

    const later = await prepare(a, b, third)
    assert.ok(urls.includes(later.target.migration?.receiverUrl), 'a finished target holds its port no more')
    await send(a, later)
    assert.equal((await b.waitForState(later.target.id, 'running')).migration?.phase, 'finished')
  })
})
