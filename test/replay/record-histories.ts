/**
 * Records workflow histories for the replay tests (`test/replay/`): drives a live stack through
 * every path of every workflow type, then saves each execution's history as JSON (as
 * `temporal workflow show --output json` writes it) into test/replay/histories, one file per
 * execution, `<workflowType>-<runId>.json`.
 *
 *   node dist/test/replay/record-histories.js <data-dir of a running dev stack> [path …]
 *
 * The stack needs at least two hosts, for the migrations; three (`VMPLANE_HOSTS=3`) give a drain
 * two hosts to move to. Each path is a function below, run in turn on instances of its own; it
 * returns the visibility queries of the executions it made, which are saved once every path has
 * run. An instance's executions are saved once none of them runs any more, so each is complete.
 *
 * Run it when a workflow's shape changes on purpose (behind `patched()`), and keep the old
 * histories: they are what workers already in production must still replay. It saves the
 * executions of every path: keep those of the paths you recorded it for.
 */
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Client, Connection } from '@temporalio/client'
import { instanceWorkflowId, hostWorkflowId } from '../../domain/ids.js'
import { forceStopSignal } from '../../contract/messages.js'
import { drainWorkflowId } from '../../contract/workflows.js'
import { readStackFile } from '../../stack/stack-file.js'
import { stackPaths } from '../../stack/data-dir.js'
import { STAND_IN_BASE_IMAGE } from '../../stack/hypervisor.js'
import { waitFor } from '../../stack/wait.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { ensureTemporalTools } from '../../scripts/tools/temporal-tools.js'

const HISTORIES = join(REPO_ROOT, 'test', 'replay', 'histories')
/** A migration slow enough to be cancelled or stopped while it sends: about 4 s of precopy for 256 MiB. */
const SLOW_MIGRATION = 'sim.migration_mib_per_s=64 sim.migration_dirty_mib_per_s=8'
/** A delete racing another's end is tried on this many instances before the path gives up. */
const DELETE_RACE_ATTEMPTS = 10
/**
 * Deletes sent one after another to an instance being deleted, at most. Bounded: every delete
 * accepted is an operation its execution records, and deletes sent without pause outpace the
 * records (one flood had 10,000 accepted, Temporal's limit of signals per execution).
 */
const RACING_DELETES = 20

const dataDir = process.argv[2]
if (dataDir === undefined) {
  console.error('usage: record-histories <data-dir of a running dev stack> [path …]')
  process.exit(2)
}
const info = await readStackFile(stackPaths(dataDir).stackFile)
if (info === null) {
  console.error(`no running stack in ${dataDir}`)
  process.exit(2)
}
if (info.hosts.length < 2) {
  console.error(`the stack in ${dataDir} has ${info.hosts.length} host${info.hosts.length === 1 ? '' : 's'}: migrations need two or more (VMPLANE_HOSTS=3)`)
  process.exit(2)
}

interface Operation { id: string, status: string, error: { code: string } | null }
interface Instance {
  id: string
  state: string
  operation: Operation | null
  vmm: { id: string, hostId: string } | null
  migration: { phase: string, progress: { memoryIterations: number } } | null
}

/** The API's answer, whatever its status. */
async function request (method: string, path: string, body?: unknown): Promise<{ status: number, body: any }> {
  const response = await fetch(`${info!.apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${info!.apiToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const text = await response.text()
  // A 204 has no body.
  return { status: response.status, body: text === '' ? null : JSON.parse(text) }
}

/** The API's answer to a request that must succeed. */
async function call (method: string, path: string, body?: unknown): Promise<any> {
  const answer = await request(method, path, body)
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`)
  return answer.body
}

/** Until the instance is as `holds` wants it; returns it then. */
async function instanceWhere (id: string, what: string, holds: (instance: Instance) => boolean): Promise<Instance> {
  return await waitFor(`${id} ${what}`, async () => {
    const instance: Instance = await call('GET', `/v1/instances/${id}`)
    return holds(instance) ? instance : null
  }, { timeoutMs: 60_000, intervalMs: 100 })
}

async function settled (id: string, state: string): Promise<Instance> {
  return await instanceWhere(id, state, (instance) => instance.state === state && instance.operation === null)
}

/** An instance as users make them: a boot disk from the stand-in image, a data disk, an interface, cloud-init. */
async function create (name: string, cmdline: string, start = true, restartPolicy = 'never'): Promise<string> {
  const { instance } = await call('POST', '/v1/instances', {
    name,
    vcpus: 1,
    memoryMiB: 256,
    start,
    restartPolicy,
    boot: { kernel: 'vmlinux', cmdline },
    bootDisk: { image: STAND_IN_BASE_IMAGE },
    dataDisks: [{ name: 'data', sizeGiB: 1 }]
  })
  await settled(instance.id, start ? 'running' : 'stopped')
  return instance.id
}

const connection = await Connection.connect({ address: info.temporalAddress })
const client = new Client({ connection, namespace: info.namespace })

/** Until no execution under the workflow ID runs, so the next request starts an execution of its own. */
async function atRest (workflowId: string): Promise<void> {
  await waitFor(`${workflowId} at rest`, async () => {
    const { status } = await client.workflow.getHandle(workflowId).describe()
    return status.name === 'RUNNING' ? null : true
  }, { timeoutMs: 60_000, intervalMs: 100 })
}

function executionsOf (workflowId: string): string {
  return `WorkflowId = '${workflowId}'`
}

/** The queries of the instances' executions, once none of them runs. */
async function instanceExecutions (ids: string[]): Promise<string[]> {
  for (const id of ids) await atRest(instanceWorkflowId(id))
  return ids.map((id) => executionsOf(instanceWorkflowId(id)))
}

/** Names unique per run. */
const suffix = Date.now().toString(36)

/** One instance's whole life: create, graceful stop, start, reboot, forced stop, delete (each an execution of its own). */
async function lifecycle (): Promise<string[]> {
  const id = await create(`replay-main-${suffix}`, 'console=ttyS0')
  await call('POST', `/v1/instances/${id}/stop`, { graceSeconds: 10 })
  await settled(id, 'stopped')
  await call('POST', `/v1/instances/${id}/start`)
  await settled(id, 'running')
  await call('POST', `/v1/instances/${id}/reboot`)
  await settled(id, 'running')
  await call('POST', `/v1/instances/${id}/stop`, { graceSeconds: 0 })
  await settled(id, 'stopped')
  await atRest(instanceWorkflowId(id))
  await call('DELETE', `/v1/instances/${id}`)
  await settled(id, 'destroyed')
  return await instanceExecutions([id])
}

/** Created without starting; a start preempted by a stop while the boot hangs. */
async function preemptedStart (): Promise<string[]> {
  const id = await create(`replay-preempted-${suffix}`, 'sim.boot_ms=never', false)
  await call('POST', `/v1/instances/${id}/start`)
  await new Promise((resolve) => setTimeout(resolve, 500))
  await call('POST', `/v1/instances/${id}/stop`, { graceSeconds: 1 })
  await settled(id, 'stopped')
  return await instanceExecutions([id])
}

/** A guest that ignores the power button, killed at the deadline; a guest that powers itself off (reports only). */
async function guestsOfTheirOwn (): Promise<string[]> {
  const stubborn = await create(`replay-stubborn-${suffix}`, 'sim.ignore_power_button')
  await call('POST', `/v1/instances/${stubborn}/stop`, { graceSeconds: 1 })
  await settled(stubborn, 'stopped')
  const poweroff = await create(`replay-poweroff-${suffix}`, 'sim.poweroff_ms=300')
  await settled(poweroff, 'stopped')
  return await instanceExecutions([stubborn, poweroff])
}

/** A crash, an automatic restart (restart policy on-failure), a second crash, a stop during the backoff. */
async function crashesAndRestarts (): Promise<string[]> {
  const id = await create(`replay-crashing-${suffix}`, 'sim.crash_after_ms=1500', true, 'on-failure')
  await waitFor('a restart and a second crash', async () => {
    const events = await call('GET', `/v1/instances/${id}/events?limit=100`)
    return events.items.filter((e: { message: string }) => /restarting in/.test(e.message)).length >= 2 ? true : null
  }, { timeoutMs: 90_000, intervalMs: 250 })
  await call('POST', `/v1/instances/${id}/stop`)
  await settled(id, 'stopped')
  return await instanceExecutions([id])
}

/** An operator's forceStop cutting a long stop short. */
async function forceStopped (): Promise<string[]> {
  const id = await create(`replay-forced-${suffix}`, 'sim.ignore_power_button')
  await call('POST', `/v1/instances/${id}/stop`, { graceSeconds: 600 })
  await new Promise((resolve) => setTimeout(resolve, 500))
  await client.workflow.getHandle(instanceWorkflowId(id)).signal(forceStopSignal, { reason: 'replay' })
  await settled(id, 'stopped')
  return await instanceExecutions([id])
}

/**
 * A delete the API accepted as another delete of the instance ended, which finds the instance
 * destroyed (the `halt-of-destroyed` patch). Only a race makes one: deletes are sent one after
 * another until the API says the instance is destroyed, on new instances until one was served
 * that way.
 */
async function deleteOfDestroyed (): Promise<string[]> {
  const ids: string[] = []
  for (let attempt = 1; attempt <= DELETE_RACE_ATTEMPTS; attempt++) {
    const id = await create(`replay-deleted-twice-${suffix}-${attempt}`, 'console=ttyS0', false)
    ids.push(id)
    await deleteUntilDestroyed(id)
    await atRest(instanceWorkflowId(id))
    const events = await call('GET', `/v1/instances/${id}/events?limit=100`)
    if (events.items.some((e: { message: string }) => /already destroyed/.test(e.message))) return await instanceExecutions(ids)
  }
  throw new Error(`no delete reached an instance already destroyed in ${DELETE_RACE_ATTEMPTS} attempts`)
}

/** Deletes the instance until the API answers something other than `202` (`200`: already destroyed), `RACING_DELETES` times at most. */
async function deleteUntilDestroyed (id: string): Promise<void> {
  for (let sent = 0; sent < RACING_DELETES; sent++) {
    if ((await request('DELETE', `/v1/instances/${id}`)).status !== 202) return
  }
}

/** A reconciler pass, triggered as an operator would. */
async function reconcilerPass (): Promise<string[]> {
  const passes = async (): Promise<number> => (await call('GET', '/v1/admin/reconcile?limit=100')).items.length
  const before = await passes()
  await call('POST', '/v1/admin/reconcile')
  await waitFor('a reconcile pass', async () => await passes() > before ? true : null, { timeoutMs: 30_000, intervalMs: 250 })
  return ["WorkflowType = 'reconcile' AND ExecutionStatus = 'Completed'"]
}

/** A firewall rule made and deleted: an `applyFirewall` execution for each, sending a running instance its policy. */
async function firewallChange (): Promise<string[]> {
  const id = await create('replay-firewall', 'console=ttyS0')
  const rule = await call('POST', '/v1/firewall-rules', { target: { instance: id }, protocol: 'tcp', ports: { from: 8080, to: 8080 }, peer: { cidr: '10.0.0.0/8' } })
  await call('DELETE', `/v1/firewall-rules/${rule.id as string}`)
  const completed = "WorkflowType = 'applyFirewall' AND ExecutionStatus = 'Completed'"
  await waitFor('both changes told to the hosts', async () => (await client.workflow.count(completed)).count >= 2 ? true : null, { timeoutMs: 60_000, intervalMs: 250 })
  await call('DELETE', `/v1/instances/${id}`)
  return [completed]
}

/** Throws unless the instance's migration (a path makes one per instance) is recorded as ending in `phase`. */
async function migrationEnded (id: string, phase: string): Promise<void> {
  const [migration] = (await call('GET', `/v1/instances/${id}/migrations`)).items
  if (migration?.phase !== phase) throw new Error(`the migration of ${id} ended ${migration?.phase}, not ${phase}: ${JSON.stringify(migration)}`)
}

/** A migrate operation, waited for until it ends; throws unless it ends as `status`. */
async function migrated (id: string, status: string): Promise<void> {
  const { operation } = await call('POST', `/v1/instances/${id}/migrate?wait=60`, {})
  if (operation.status !== status) throw new Error(`the migration of ${id} ended ${operation.status}, not ${status}: ${JSON.stringify(operation)}`)
}

/** A live migration to the host placement chooses, committed and the source gone. */
async function migrationSucceeds (): Promise<string[]> {
  const id = await create(`replay-migrated-${suffix}`, 'console=ttyS0')
  await migrated(id, 'succeeded')
  await settled(id, 'running')
  await migrationEnded(id, 'succeeded')
  return await instanceExecutions([id])
}

/** A migration cancelled while it sends: the target is killed and the VM runs on at its source. */
async function migrationCancelled (): Promise<string[]> {
  const id = await create(`replay-migration-cancelled-${suffix}`, `console=ttyS0 ${SLOW_MIGRATION}`)
  await call('POST', `/v1/instances/${id}/migrate`, {})
  await instanceWhere(id, 'sending the VM', (instance) => instance.migration?.phase === 'sending')
  const { operation } = await call('POST', `/v1/instances/${id}/migrate/cancel?wait=30`)
  if (operation.error?.code !== 'MigrationCancelled') throw new Error(`the cancelled migration of ${id} ended ${JSON.stringify(operation)}`)
  await settled(id, 'running')
  await migrationEnded(id, 'cancelled')
  return await instanceExecutions([id])
}

/**
 * A migration whose final acknowledgement is lost (`sim.migration_fail_at=ack`): the target
 * resumes the VM while the source fails its send and resumes it too; the target wins.
 */
async function migrationAckLost (): Promise<string[]> {
  const id = await create(`replay-migration-ack-lost-${suffix}`, 'console=ttyS0 sim.migration_fail_at=ack')
  await migrated(id, 'succeeded')
  await settled(id, 'running')
  await migrationEnded(id, 'succeeded')
  return await instanceExecutions([id])
}

/** A stop while the VM is being sent: the migration is aborted and both VMMs are stopped. */
async function stopDuringMigration (): Promise<string[]> {
  const id = await create(`replay-migration-stopped-${suffix}`, `console=ttyS0 ${SLOW_MIGRATION} sim.ignore_power_button`)
  await call('POST', `/v1/instances/${id}/migrate`, {})
  await instanceWhere(id, 'sending memory', (instance) => instance.migration?.phase === 'sending' && instance.migration.progress.memoryIterations >= 1)
  await call('POST', `/v1/instances/${id}/stop`, { graceSeconds: 2 })
  await settled(id, 'stopped')
  await migrationEnded(id, 'aborted')
  return await instanceExecutions([id])
}

/**
 * A drain of a host running two instances, which migrates them away and ends `drained`; then
 * the host is uncordoned, so the paths after it have every host. Instances are made until one
 * host has two (placement spreads them).
 */
async function drain (): Promise<string[]> {
  const ids: string[] = []
  const hostsOf = new Map<string, string[]>()
  let drained: string | undefined
  while (drained === undefined) {
    const id = await create(`replay-drained-${suffix}-${ids.length + 1}`, 'console=ttyS0')
    ids.push(id)
    const { hostId } = (await settled(id, 'running')).vmm!
    hostsOf.set(hostId, [...hostsOf.get(hostId) ?? [], id])
    if (hostsOf.get(hostId)!.length === 2) drained = hostId
  }
  await call('POST', `/v1/hosts/${drained}/drain`, { concurrency: 2 })
  await waitFor(`${drained} drained`, async () => {
    const hosts = await call('GET', '/v1/hosts')
    return hosts.items.find((h: { id: string }) => h.id === drained).drain?.status === 'drained' ? true : null
  }, { timeoutMs: 120_000, intervalMs: 500 })
  await atRest(drainWorkflowId(drained))
  await call('POST', `/v1/hosts/${drained}/uncordon`)
  for (const id of ids) await settled(id, 'running')
  return [executionsOf(drainWorkflowId(drained)), ...await instanceExecutions(ids)]
}

/** The hosts' monitors, as they run (they continue as new, and never end). */
async function hostMonitors (): Promise<string[]> {
  return info!.hosts.map((h) => executionsOf(hostWorkflowId(h.id)))
}

/** The drain runs before the migrations, so that it moves only instances of its own. */
const PATHS = [
  lifecycle, preemptedStart, guestsOfTheirOwn, crashesAndRestarts, forceStopped, deleteOfDestroyed, reconcilerPass, firewallChange,
  drain, migrationSucceeds, migrationCancelled, migrationAckLost, stopDuringMigration, hostMonitors
]

// Paths named after the data dir are the only ones recorded (all of them without any).
const chosen = process.argv.slice(3)
const unknown = chosen.filter((name) => !PATHS.some((path) => path.name === name))
if (unknown.length > 0) {
  console.error(`no such path: ${unknown.join(', ')}; the paths are ${PATHS.map((path) => path.name).join(', ')}`)
  process.exit(2)
}

const recorded: Array<{ path: string, queries: string[] }> = []
for (const path of PATHS.filter((p) => chosen.length === 0 || chosen.includes(p.name))) {
  console.log(`recording ${path.name}`)
  recorded.push({ path: path.name, queries: await path() })
}

// `temporal workflow show --output json` writes the JSON form the SDK's replayer reads.
const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
let saved = 0
for (const { path, queries } of recorded) {
  for (const query of queries) {
    for await (const execution of client.workflow.list({ query })) {
      const { stdout } = await promisify(execFile)(temporal, [
        'workflow', 'show', '--address', info.temporalAddress, '--namespace', info.namespace,
        '--workflow-id', execution.workflowId, '--run-id', execution.runId, '--output', 'json'
      ], { maxBuffer: 64 * 1024 * 1024 })
      const file = `${execution.type}-${execution.runId}.json`
      await writeFile(join(HISTORIES, file), stdout)
      console.log(`${path}: ${file} (${execution.workflowId}, ${execution.status.name})`)
      saved++
    }
  }
}
await connection.close()
console.log(`saved ${saved} histories into ${HISTORIES}`)
