/**
 * Migrate, cancel, drain and uncordon requests the API must refuse (issue 17): each answer is a
 * problem naming what is wrong, and nothing changes (no operation, no cordon, no drain). What the
 * accepted ones do is in test/integration/migration.test.ts.
 *
 * The API runs in process over a real PostgreSQL; the hosts and instances are rows written here.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { OPERATOR_TOKEN, VIEWER_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'

const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }

function assertProblem (response: LightMyRequestResponse, status: number, detail: RegExp): void {
  assert.equal(response.statusCode, status, response.body)
  assert.match(String(response.headers['content-type']), /^application\/problem\+json/)
  assert.match(response.json().detail, detail)
}

describe('migration and drain requests, refused for what cannot be', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  let running: string
  let stopped: string

  before(async () => {
    api = await startInProcessApi()
    const db = api.database.pool
    await db.query(`INSERT INTO hosts (id, agent_url, vcpus, memory_mib, storage_gib, cordoned_at) VALUES
      ('host-1', 'http://127.0.0.1:1', 8, 8192, 100, NULL), ('host-2', 'http://127.0.0.1:1', 8, 8192, 100, now()),
      ('host-3', 'http://127.0.0.1:1', 8, 8192, 100, NULL)`)
    await db.query("UPDATE hosts SET status = 'unreachable' WHERE id = 'host-3'")
    running = randomUUID()
    stopped = randomUUID()
    for (const [id, name, state] of [[running, 'runs', 'running'], [stopped, 'rests', 'stopped']]) {
      await db.query(`INSERT INTO instances (id, project_id, name, vcpus, memory_mib, boot, stop_grace_seconds, state, intended_state)
        VALUES ($1, (SELECT id FROM projects WHERE name = 'default'), $2, 1, 256, '{"kernel": "vmlinux"}', 30, $3, 'running')`, [id, name, state])
    }
    const vmm = randomUUID()
    await db.query("INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, 'host-1', 'running')", [vmm, running])
    await db.query('UPDATE instances SET active_vmm_id = $1 WHERE id = $2', [vmm, running])
  })
  after(async () => { await api?.stop() })

  async function post (url: string, payload?: Record<string, unknown>, headers: Record<string, string> = auth): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload }) })
  }

  async function nothingChanged (): Promise<void> {
    const db = api.database.pool
    const { rows } = await db.query(`SELECT (SELECT count(*) FROM operations)::int AS operations, (SELECT count(*) FROM drains)::int AS drains,
      (SELECT count(*) FROM migrations)::int AS migrations, (SELECT array_agg(id ORDER BY id) FROM hosts WHERE cordoned_at IS NOT NULL) AS cordoned`)
    assert.deepEqual(rows[0], { operations: 0, drains: 0, migrations: 0, cordoned: ['host-2'] })
  }

  it('refuses a migration to a host that does not exist, is cordoned, is not active, or is its own', async () => {
    assertProblem(await post(`/v1/instances/${running}/migrate`, { targetHostId: 'host-9' }), 422, /targetHostId: host host-9 does not exist/)
    assertProblem(await post(`/v1/instances/${running}/migrate`, { targetHostId: 'host-2' }), 409, /targetHostId: host host-2 is cordoned/)
    assertProblem(await post(`/v1/instances/${running}/migrate`, { targetHostId: 'host-3' }), 409, /targetHostId: host host-3 is unreachable/)
    assertProblem(await post(`/v1/instances/${running}/migrate`, { targetHostId: 'host-1' }), 409, /already runs on host host-1/)
    assertProblem(await post(`/v1/instances/${running}/migrate`, { targetHostId: 'Host One' }), 400, /targetHostId/)
    assertProblem(await post(`/v1/instances/${running}/migrate`, { to: 'host-1' }), 400, /to/)
    await nothingChanged()
  })

  it('refuses to migrate an instance that is not running, and a viewer', async () => {
    assertProblem(await post(`/v1/instances/${stopped}/migrate`), 409, /cannot migrate an instance that is stopped/)
    assertProblem(await post(`/v1/instances/${randomUUID()}/migrate`), 404, /does not exist/)
    assertProblem(await post(`/v1/instances/${running}/migrate`, undefined, { authorization: `Bearer ${VIEWER_TOKEN}` }), 403, /may not change a project's resources/)
    await nothingChanged()
  })

  it('refuses to cancel a migration that is not there', async () => {
    assertProblem(await post(`/v1/instances/${running}/migrate/cancel`), 409, /no migration is in progress/)
    const missing = randomUUID()
    assertProblem(await api.server.inject({ method: 'DELETE', url: `/v1/instances/${running}/migrations/${missing}`, headers: auth }), 404, new RegExp(`no migration ${missing}`))
    const list = await api.server.inject({ method: 'GET', url: `/v1/instances/${running}/migrations`, headers: auth })
    assert.deepEqual(list.json(), { items: [] })
    await nothingChanged()
  })

  it('refuses to drain or uncordon a host that does not exist, or with a bad concurrency', async () => {
    assertProblem(await post('/v1/hosts/host-9/drain'), 404, /host host-9 does not exist/)
    assertProblem(await post('/v1/hosts/host-9/uncordon'), 404, /host host-9 does not exist/)
    assertProblem(await post('/v1/hosts/host-9/cordon'), 404, /host host-9 does not exist/)
    assertProblem(await post('/v1/hosts/host-1/drain', { concurrency: 0 }), 400, /concurrency/)
    assertProblem(await post('/v1/hosts/-bad/drain'), 400, /host ID/)
    await nothingChanged()
  })

  it('shows whether a host is cordoned, and its drain', async () => {
    const hosts = (await api.server.inject({ method: 'GET', url: '/v1/hosts', headers: auth })).json().items as Array<{ id: string, cordonedAt: string | null, drain: unknown }>
    assert.deepEqual(hosts.map((h) => [h.id, h.cordonedAt !== null, h.drain]), [['host-1', false, null], ['host-2', true, null], ['host-3', false, null]])
    const response = await api.server.inject({ method: 'GET', url: `/v1/instances/${running}`, headers: auth })
    const instance = response.json()
    assert.equal(response.statusCode, 200, response.body)
    assert.equal(instance.migration, null)
  })

  it('cordons a host without draining it, keeping the first cordon\'s time, until it is uncordoned', async () => {
    const first = await post('/v1/hosts/host-3/cordon')
    assert.equal(first.statusCode, 200, first.body)
    const cordonedAt = first.json().cordonedAt as string
    assert.ok(cordonedAt !== null)
    assert.equal(first.json().drain, null, 'a cordon starts no drain')
    assert.equal((await post('/v1/hosts/host-3/cordon')).json().cordonedAt, cordonedAt, 'cordoning twice changes nothing')
    const { rows } = await api.database.pool.query<{ drains: number }>('SELECT count(*)::int AS drains FROM drains')
    assert.equal(rows[0]!.drains, 0)
    assert.equal((await post('/v1/hosts/host-3/uncordon')).json().cordonedAt, null)
  })
})
