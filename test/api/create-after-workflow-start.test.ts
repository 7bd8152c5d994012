/**
 * A create whose transaction fails after its workflow started (issue 25, item 7): the workflow's
 * start is the decision, and the workflow makes the instance whatever the API's transaction did,
 * so the create is accepted. The API must answer the accept (202, the instance and its operation,
 * as PostgreSQL holds them), never an error that tells the client a create failed which then
 * comes into being; and what PostgreSQL holds must be whole: the instance with its disk and its
 * interface's address, and an operation that the create's execution ends with the truth. A retry
 * with the Idempotency-Key that finds its create's workflow started by an earlier attempt, which
 * recorded nothing, is accepted the same way.
 *
 * The API runs in process over a real PostgreSQL, with a Temporal dev server of the test's own.
 * The failure is a trigger the test adds to its database: the operation's insert fails, or the
 * COMMIT does (a deferred trigger), as they would while PostgreSQL restarts. No worker runs
 * until the last case, which runs one with the real activities: the creates do not start their
 * instances, so no host is called.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { TestWorkflowEnvironment } from '@temporalio/testing'
import { Worker } from '@temporalio/worker'
import type { LightMyRequestResponse } from 'fastify'
import { workerConfig } from '../../config/index.js'
import { instanceWorkflowId } from '../../domain/ids.js'
import { workerActivities } from '../../worker/index.js'
import { WORKFLOW_BUNDLE_PATH } from '../../worker/workflow-bundle.js'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { whileInsertsFail } from '../helpers/database.js'
import { startLocalTemporal } from '../helpers/workflow-environment.js'

const TASK_QUEUE = 'create-after-workflow-start'

/**
 * A failure of the first `times` transactions that insert an operation: at the insert or at the
 * COMMIT, with PostgreSQL's error code `sqlstate` (P0001: an error raised; 57P03: the database
 * system is starting up).
 */
interface Failure { at: 'insert' | 'commit', times: number, sqlstate: string }

const FAILURES: Record<string, Failure> = {
  "the operation's insert fails": { at: 'insert', times: 1, sqlstate: 'P0001' },
  'the COMMIT fails': { at: 'commit', times: 1, sqlstate: 'P0001' },
  'the COMMIT fails, and the next two while PostgreSQL starts up': { at: 'commit', times: 3, sqlstate: '57P03' }
}

function triggerOf ({ at, times, sqlstate }: Failure): string {
  const fires = at === 'insert' ? 'TRIGGER injected_failure BEFORE INSERT' : 'CONSTRAINT TRIGGER injected_failure AFTER INSERT'
  const when = at === 'insert' ? '' : 'DEFERRABLE INITIALLY DEFERRED'
  return `CREATE ${fires} ON operations ${when} FOR EACH ROW EXECUTE FUNCTION fail_first(${times}, '${sqlstate}')`
}

interface AcceptedBody {
  instance: { id: string, name: string, state: string, disks: Array<{ id: string }>, interfaces: Array<{ id: string, ip: string }> }
  operation: { id: string, kind: string, status: string }
}

describe('a create whose transaction fails after its workflow started', { timeout: 3 * 60_000 }, () => {
  let temporal: TestWorkflowEnvironment
  let api: InProcessApi
  /** The creates answered accepted; and how many were sent, to name each. */
  const accepted: AcceptedBody[] = []
  let creates = 0

  before(async () => {
    temporal = await startLocalTemporal()
    api = await startInProcessApi({ env: { VMPLANE_TEMPORAL_ADDRESS: temporal.address, VMPLANE_TASK_QUEUE: TASK_QUEUE } })
    const db = api.database.pool
    await db.query("INSERT INTO hosts (id, agent_url, vcpus, memory_mib, storage_gib) VALUES ('host-1', 'http://127.0.0.1:1', 8, 8192, 100)")
    await db.query("INSERT INTO networks (id, project_id, name, cidr, gateway) VALUES (gen_random_uuid(), (SELECT id FROM projects WHERE name = 'default'), 'default', '10.30.0.0/24', '10.30.0.1')")
    // The first times it fires after the sequence restarts, it fails; a sequence is not rolled back.
    await db.query('CREATE SEQUENCE injected_failures')
    await db.query(`CREATE FUNCTION fail_first () RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('injected_failures') <= TG_ARGV[0]::int THEN
          RAISE EXCEPTION 'injected failure at operation %', NEW.id USING ERRCODE = TG_ARGV[1];
        END IF;
        RETURN NEW;
      END $$`)
  })
  after(async () => {
    await api?.stop()
    await temporal?.teardown()
  })

  async function create (name: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return await api.server.inject({
      method: 'POST',
      url: '/v1/instances',
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, ...headers },
      payload: { name, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux' }, start: false, dataDisks: [{ name: 'data', sizeGiB: 1 }] }
    })
  }

  /** Runs `work` with the failure armed: what it gave, and how many times the trigger fired. */
  async function failing<T> (failure: Failure, work: () => Promise<T>): Promise<{ result: T, fired: number }> {
    const db = api.database.pool
    await db.query('ALTER SEQUENCE injected_failures RESTART')
    await db.query(triggerOf(failure))
    try {
      const result = await work()
      const { rows } = await db.query<{ fired: string }>('SELECT last_value AS fired FROM injected_failures')
      return { result, fired: Number(rows[0]!.fired) }
    } finally {
      await db.query('DROP TRIGGER injected_failure ON operations')
    }
  }

  /** What PostgreSQL holds of the instance: its state, disks, addresses and operations. */
  async function recordOf (instanceId: string) {
    const { rows } = await api.database.pool.query(
      `SELECT i.state,
              (SELECT array_agg(d.id::text ORDER BY d.slot) FROM disks d WHERE d.instance_id = i.id) AS disks,
              (SELECT array_agg(host(n.ip) ORDER BY n.slot) FROM interfaces n WHERE n.instance_id = i.id) AS ips,
              (SELECT json_agg(json_build_object('id', o.id, 'status', o.status, 'runId', o.run_id)) FROM operations o WHERE o.instance_id = i.id) AS operations
         FROM instances i WHERE i.id = $1`,
      [instanceId]
    )
    return rows[0] ?? null
  }

  async function assertAccepted (response: LightMyRequestResponse, name: string): Promise<AcceptedBody> {
    assert.equal(response.statusCode, 202, response.body)
    const body = response.json() as AcceptedBody
    assert.equal(body.instance.name, name)
    assert.equal(body.instance.state, 'creating')
    assert.equal(body.instance.disks.length, 1)
    assert.equal(body.instance.interfaces.length, 1)
    assert.deepEqual([body.operation.kind, body.operation.status], ['create', 'running'])

    const workflow = await temporal.client.workflow.getHandle(instanceWorkflowId(body.instance.id)).describe()
    assert.equal(workflow.status.name, 'RUNNING')
    assert.deepEqual(await recordOf(body.instance.id), {
      state: 'creating',
      disks: body.instance.disks.map((disk) => disk.id),
      ips: body.instance.interfaces.map((nic) => nic.ip),
      operations: [{ id: body.operation.id, status: 'running', runId: workflow.runId }]
    })
    return body
  }

  for (const [what, failure] of Object.entries(FAILURES)) {
    it(`answers the accept when ${what}, with the instance, its disk, its address and its operation recorded`, async () => {
      const name = `late-${++creates}`
      const { result: response, fired } = await failing(failure, async () => await create(name))
      accepted.push(await assertAccepted(response, name))
      assert.equal(fired, failure.times + 1, `the failure struck ${failure.times} time(s), then let the operation's row be made`)
    })
  }

  it('answers the accept to a retry with the Idempotency-Key of a create whose workflow an earlier attempt started', async () => {
    const name = `retried-${++creates}`
    const key = { 'idempotency-key': `create-${name}` }
    const db = api.database.pool
    // The first attempt can record nothing, however often it tries: its API cannot answer the accept.
    const first = await whileInsertsFail(db, 'operations', 'operations refused', async () => await create(name, key))
    assert.equal(first.statusCode, 500, first.body)
    const { rows } = await db.query('SELECT 1 FROM instances WHERE name = $1', [name])
    assert.equal(rows.length, 0, 'nothing recorded')
    accepted.push(await assertAccepted(await create(name, key), name))
  })

  it('ends each create with the truth once a worker runs it: the instances answered accepted, stopped, their disks and addresses as answered', async () => {
    const db = api.database.pool
    const config = workerConfig({ DATABASE_URL: api.database.databaseUrl, VMPLANE_AGENT_TOKEN: 'agent-token-never-used' })
    const worker = await Worker.create({
      connection: temporal.nativeConnection,
      taskQueue: TASK_QUEUE,
      workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH },
      activities: workerActivities(config, db)
    })
    // Every create's workflow the API started (the dev server is this test's own), answered accepted or not.
    const workflows: string[] = []
    for await (const workflow of temporal.client.workflow.list()) workflows.push(workflow.workflowId)
    assert.equal(workflows.length, creates, workflows.join(', '))
    await worker.runUntil(Promise.all(workflows.map(async (id) => await temporal.client.workflow.getHandle(id).result())))

    const { rows } = await db.query<{ id: string }>('SELECT id FROM instances ORDER BY id')
    assert.deepEqual(rows.map((row) => row.id), accepted.map((body) => body.instance.id).sort(), 'an instance for each create answered accepted, and no other')
    for (const body of accepted) {
      const record = await recordOf(body.instance.id)
      assert.equal(record.state, 'stopped')
      assert.deepEqual(record.disks, body.instance.disks.map((disk) => disk.id))
      assert.deepEqual(record.ips, body.instance.interfaces.map((nic) => nic.ip))
      assert.deepEqual(record.operations.map((op: { id: string, status: string }) => [op.id, op.status]), [[body.operation.id, 'succeeded']])
    }
  })
})
