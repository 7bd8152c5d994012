/**
 * The stack's cluster shape (VMPLANE_TEMPORAL=cluster), on real processes: Temporal's own server
 * with its four services, persisted in the stack's PostgreSQL with 16 history shards, its Web UI's
 * server beside it, its namespace and vmplane's search attributes registered with the `temporal`
 * CLI, and two API replicas behind HAProxy and two workers in front of it. vmplane drives
 * instances on it through the API, and keeps doing so after Temporal and then PostgreSQL are
 * SIGKILLed and restarted by the stack, and after the stack itself is restarted on the same data
 * directory (which finds the schemas and registrations in place).
 */
import assert from 'node:assert/strict'
import { basename } from 'node:path'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import { processCommandLine } from '../../stack/processes.js'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { lastReconcilePass, nextReconcilePass, temporalCli } from '../helpers/operator.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const VMPLANE_ATTRIBUTES = ['InstanceId', 'InstanceState', 'HostId', 'Operation']

describe('the cluster shape: Temporal\'s server on PostgreSQL', { timeout: 600_000 }, () => {
  let stack: TestStack

  before(async () => {
    stack = await startStack({ hosts: 1, temporal: 'cluster' })
  })
  after(async () => {
    await stack?.stop()
  })

  test('runs temporal-server on postgres12 persistence and visibility, 16 history shards', async () => {
    assert.equal(stack.info.temporalShape, 'cluster')
    const argv = await processCommandLine(await stack.pid('temporal'))
    assert.equal(basename(argv?.[0] ?? ''), 'temporal-server', `the temporal component runs ${argv?.join(' ')}`)

    const cluster = JSON.parse(await temporalCli(stack, 'operator', 'cluster', 'describe', '--output', 'json'))
    assert.equal(cluster.historyShardCount, 16)
    assert.equal(cluster.persistenceStore, 'postgres12')
    assert.equal(cluster.visibilityStore, 'postgres12')
    assert.equal(cluster.serverVersion, '1.29.1')

    const owners = await databaseOwners()
    assert.equal(owners.temporal, 'temporal', 'Temporal\'s persistence is a database of its own role')
    assert.equal(owners.temporal_visibility, 'temporal')
  })

  test('runs two API replicas behind HAProxy and two workers', async () => {
    assert.equal(stack.info.apiUrls.length, 2)
    assert.deepEqual(Object.keys(stack.info.metricsUrls).filter((component) => component.startsWith('worker')).sort(), ['worker', 'worker-2'])
    for (const component of ['api', 'api-2', 'haproxy', 'worker', 'worker-2']) assert.ok(await stack.pid(component) > 0, `${component} runs`)
  })

  test('serves the Web UI, which shows the cluster', async () => {
    const page = await fetch(stack.info.temporalUiUrl)
    assert.equal(page.status, 200)
    assert.match(await page.text(), /<html/i)
    // The UI's own API, which its pages call: answered from the frontend it is connected to.
    const info = await fetch(`${stack.info.temporalUiUrl}/api/v1/cluster-info`)
    assert.equal(info.status, 200)
    assert.equal((await info.json() as { historyShardCount: number }).historyShardCount, 16)
  })

  test('has the namespace and vmplane\'s search attributes registered', async () => {
    const namespace = JSON.parse(await temporalCli(stack, 'operator', 'namespace', 'describe', '--output', 'json'))
    assert.equal(namespace.namespaceInfo.name, stack.info.namespace)
    assert.equal(namespace.namespaceInfo.state, 'NAMESPACE_STATE_REGISTERED')
    const listed = JSON.parse(await temporalCli(stack, 'operator', 'search-attribute', 'list', '--output', 'json'))
    for (const name of VMPLANE_ATTRIBUTES) assert.equal(listed.customAttributes[name], 'INDEXED_VALUE_TYPE_KEYWORD', name)
  })

  test('an instance is created, runs, stops and is deleted through the API', async () => {
    await lifecycle('cluster-1')
  })

  test('runs the reconciler\'s Schedule (schedules run in Temporal\'s worker service)', async () => {
    const previous = await lastReconcilePass(stack)
    assert.equal((await api(stack).post('/v1/admin/reconcile')).status, 202)
    await nextReconcilePass(stack, previous?.id ?? null)
  })

  test('after SIGKILL of temporal, then of postgres, each restarted by the stack, instances still go their way', async () => {
    const running = await createRunning('cluster-2')

    await stack.kill('temporal')
    await stack.waitForRestart('temporal')
    await stack.waitForReady()
    const stopped = await api(stack).post(`/v1/instances/${running.id}/stop`, { graceSeconds: 5 })
    assert.equal(stopped.status, 202, JSON.stringify(stopped.body))
    await waitForState(stack, running.id, 'stopped')

    await stack.kill('postgres')
    await stack.waitForRestart('postgres')
    await stack.waitForReady()
    const started = await api(stack).post(`/v1/instances/${running.id}/start`)
    assert.equal(started.status, 202, JSON.stringify(started.body))
    await waitForState(stack, running.id, 'running')
    assert.equal((await api(stack).delete(`/v1/instances/${running.id}?graceSeconds=0`)).status, 202)
    await waitForState(stack, running.id, 'destroyed')

    await lifecycle('cluster-3')
  })

  test('a restart on the same data directory finds the schemas at version and everything registered', async () => {
    const linesBefore = (await stack.logLines('stack')).length
    stack = await stack.restart()
    const restart = (await stack.logLines('stack')).slice(linesBefore).join('\n')
    assert.match(restart, /Temporal's database temporal at schema version \d+\.\d+/)
    assert.match(restart, /Temporal's database temporal_visibility at schema version \d+\.\d+/)
    assert.doesNotMatch(restart, /registered in Temporal/, 'the namespace and the attributes were there')
    await lifecycle('cluster-4')
  })

  async function createRunning (name: string): Promise<InstanceBody> {
    const created = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', newInstance(name))
    assert.equal(created.status, 202, JSON.stringify(created.body))
    return await waitForState(stack, created.body.instance.id, 'running')
  }

  /** create → running → stop → stopped → delete → destroyed. */
  async function lifecycle (name: string): Promise<void> {
    const { id } = await createRunning(name)
    assert.equal((await api(stack).post(`/v1/instances/${id}/stop`, { graceSeconds: 5 })).status, 202)
    assert.equal((await waitForState(stack, id, 'stopped')).intendedState, 'stopped')
    assert.equal((await api(stack).delete(`/v1/instances/${id}`)).status, 202)
    assert.ok((await waitForState(stack, id, 'destroyed')).destroyedAt !== null)
  }

  /** Each database's owning role, as the stack's PostgreSQL records it. */
  async function databaseOwners (): Promise<Record<string, string>> {
    const client = new pg.Client({ connectionString: stack.info.databaseUrl })
    await client.connect()
    try {
      const { rows } = await client.query<{ datname: string, owner: string }>(
        'SELECT datname, pg_get_userbyid(datdba) AS owner FROM pg_database')
      return Object.fromEntries(rows.map((row) => [row.datname, row.owner]))
    } finally {
      await client.end()
    }
  }
})
