/**
 * Records workflow histories for the replay tests (`test/replay/`): drives a live stack through
 * every path of every workflow type, then saves each execution's history as JSON (as
 * `temporal workflow show --output json` writes it).
 *
 *   node dist/scripts/record-histories.js <data-dir of a running dev stack>
 *
 * Run it when a workflow's shape changes on purpose (behind `patched()`), and keep the old
 * histories: they are what workers already in production must still replay.
 */
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Client, Connection } from '@temporalio/client'
import { instanceWorkflowId, hostWorkflowId } from '../domain/ids.js'
import { forceStopSignal } from '../workflows/definitions.js'
import { readStackFile } from './dev-stack/stack-file.js'
import { stackPaths } from './dev-stack/data-dir.js'
import { STAND_IN_BASE_IMAGE } from './dev-stack/hypervisor.js'
import { waitFor } from './dev-stack/wait.js'
import { REPO_ROOT } from './tools/paths.js'
import { ensureTemporalTools } from './tools/temporal-tools.js'

const HISTORIES = join(REPO_ROOT, 'test', 'replay', 'histories')

const dataDir = process.argv[2]
if (dataDir === undefined) {
  console.error('usage: record-histories <data-dir of a running dev stack>')
  process.exit(2)
}
const info = await readStackFile(stackPaths(dataDir).stackFile)
if (info === null) {
  console.error(`no running stack in ${dataDir}`)
  process.exit(2)
}

async function call (method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${info!.apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${info!.apiToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const json = await response.json()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`)
  return json
}

async function settled (id: string, state: string): Promise<void> {
  await waitFor(`${id} ${state}`, async () => {
    const instance = await call('GET', `/v1/instances/${id}`)
    return instance.state === state && instance.operation === null ? true : null
  }, { timeoutMs: 60_000, intervalMs: 100 })
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

/** Until no execution of the instance runs, so the next request starts an execution of its own. */
async function atRest (id: string): Promise<void> {
  await waitFor(`${id} at rest`, async () => {
    const { status } = await client.workflow.getHandle(instanceWorkflowId(id)).describe()
    return status.name === 'RUNNING' ? null : true
  }, { timeoutMs: 60_000, intervalMs: 100 })
}

const ids: string[] = []
// create, graceful stop, start, reboot, forced stop, delete (names unique per run)
const suffix = Date.now().toString(36)
const main = await create(`replay-main-${suffix}`, 'console=ttyS0')
ids.push(main)
await call('POST', `/v1/instances/${main}/stop`, { graceSeconds: 10 })
await settled(main, 'stopped')
await call('POST', `/v1/instances/${main}/start`)
await settled(main, 'running')
await call('POST', `/v1/instances/${main}/reboot`)
await settled(main, 'running')
await call('POST', `/v1/instances/${main}/stop`, { graceSeconds: 0 })
await settled(main, 'stopped')
await atRest(main)
await call('DELETE', `/v1/instances/${main}`)
await settled(main, 'destroyed')
// created without starting; a start preempted by a stop while the boot hangs
const preempted = await create(`replay-preempted-${suffix}`, 'sim.boot_ms=never', false)
ids.push(preempted)
await call('POST', `/v1/instances/${preempted}/start`)
await new Promise((resolve) => setTimeout(resolve, 500))
await call('POST', `/v1/instances/${preempted}/stop`, { graceSeconds: 1 })
await settled(preempted, 'stopped')
// a guest that ignores the power button; a guest that powers itself off (reports only)
const stubborn = await create(`replay-stubborn-${suffix}`, 'sim.ignore_power_button')
ids.push(stubborn)
await call('POST', `/v1/instances/${stubborn}/stop`, { graceSeconds: 1 })
await settled(stubborn, 'stopped')
const poweroff = await create(`replay-poweroff-${suffix}`, 'sim.poweroff_ms=300')
ids.push(poweroff)
await settled(poweroff, 'stopped')

// a crash, an automatic restart (restart policy on-failure), a second crash, a stop during the backoff
const crashing = await create(`replay-crashing-${suffix}`, 'sim.crash_after_ms=1500', true, 'on-failure')
ids.push(crashing)
await waitFor('a restart and a second crash', async () => {
  const events = await call('GET', `/v1/instances/${crashing}/events?limit=100`)
  return events.items.filter((e: { message: string }) => /restarting in/.test(e.message)).length >= 2 ? true : null
}, { timeoutMs: 90_000, intervalMs: 250 })
await call('POST', `/v1/instances/${crashing}/stop`)
await settled(crashing, 'stopped')

// an operator's forceStop cutting a long stop short
const forced = await create(`replay-forced-${suffix}`, 'sim.ignore_power_button')
ids.push(forced)
await call('POST', `/v1/instances/${forced}/stop`, { graceSeconds: 600 })
await new Promise((resolve) => setTimeout(resolve, 500))
await client.workflow.getHandle(instanceWorkflowId(forced)).signal(forceStopSignal, { reason: 'replay' })
await settled(forced, 'stopped')

// a reconciler pass, triggered as an operator would
const passes = async (): Promise<number> => (await call('GET', '/v1/admin/reconcile?limit=100')).items.length
const before = await passes()
await call('POST', '/v1/admin/reconcile')
await waitFor('a reconcile pass', async () => await passes() > before ? true : null, { timeoutMs: 30_000, intervalMs: 250 })

// `temporal workflow show --output json` writes the JSON form the SDK's replayer reads.
const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
let saved = 0
const queries = [
  ...[...ids.map(instanceWorkflowId), ...info.hosts.map((h) => hostWorkflowId(h.id))].map((id) => `WorkflowId = '${id}'`),
  "WorkflowType = 'reconcile' AND ExecutionStatus = 'Completed'"
]
for (const query of queries) {
  for await (const execution of client.workflow.list({ query })) {
    const workflowId = execution.workflowId
    const { stdout } = await promisify(execFile)(temporal, [
      'workflow', 'show', '--address', info.temporalAddress, '--namespace', info.namespace,
      '--workflow-id', workflowId, '--run-id', execution.runId, '--output', 'json'
    ], { maxBuffer: 64 * 1024 * 1024 })
    await writeFile(join(HISTORIES, `${execution.type}-${execution.runId}.json`), stdout)
    saved++
  }
}
await connection.close()
console.log(`saved ${saved} histories into ${HISTORIES}`)
