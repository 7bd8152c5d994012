/**
 * Projects' quotas in the fast layer (db/quotas.ts; docs/design.md §18), over a real PostgreSQL
 * with a stub in Temporal's place: 50 creates at once against a quota of 10 vCPUs take exactly 10;
 * a create's rows inserted again (its workflow ensuring them, a replayed activity) or its request
 * replayed under its Idempotency-Key charge nothing more; a delete gives its charge back only once
 * the instance is recorded destroyed, and only once.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { insertInstance, releaseDevicesOf, updateRuntimeFields } from '../../db/instances.js'
import { inTransaction } from '../../db/pool.js'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

const CREATES = 50
const VCPUS = 10

interface Quotas {
  limits: Record<string, number | null>
  use: Record<string, number>
}

describe('project quotas', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  const temporal = new TemporalStub()
  let collaborator: string
  let projectId: string

  async function send (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: Record<string, unknown>, token = collaborator, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    return await api.server.inject({ method, url, headers: { authorization: `Bearer ${token}`, ...headers }, ...(payload === undefined ? {} : { payload }) })
  }

  async function quotas (): Promise<Quotas> {
    const response = await send('GET', '/v1/projects/q/quotas')
    assert.equal(response.statusCode, 200, response.body)
    return response.json() as Quotas
  }

  function create (name: string): Record<string, unknown> {
    return { name, vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux' }, start: false }
  }

  before(async () => {
    api = await startInProcessApi({ temporal })
    const project = await send('POST', '/v1/projects', { name: 'q' }, OPERATOR_TOKEN)
    assert.equal(project.statusCode, 201, project.body)
    projectId = project.json().id
    const set = await send('PUT', '/v1/projects/q/quotas', { vcpus: VCPUS }, OPERATOR_TOKEN)
    assert.equal(set.statusCode, 200, set.body)
    collaborator = (await send('POST', '/v1/projects/q/tokens', { name: 'racer', role: 'collaborator' }, OPERATOR_TOKEN)).json().token
  })
  after(async () => { await api?.stop() })

  it(`takes exactly ${VCPUS} of ${CREATES} creates sent at once, refusing the others naming the quota, and reads exactly ${VCPUS} in use`, async () => {
    const answers = await Promise.all(Array.from({ length: CREATES }, async (_, i) => await send('POST', '/v1/projects/q/instances', create(`racer-${i}`))))
    const accepted = answers.filter((a) => a.statusCode === 202)
    const refused = answers.filter((a) => a.statusCode === 409)
    assert.equal(accepted.length, VCPUS, answers.map((a) => a.statusCode).join(' '))
    assert.equal(refused.length, CREATES - VCPUS)
    for (const answer of refused) assert.match(answer.json().detail, /^over the project's quota: the project's quota on vcpus is 10: 10 in use, and this instance needs 1$/)
    const after = await quotas()
    assert.equal(after.use.vcpus, VCPUS)
    assert.equal(after.use.instances, VCPUS)
    const { rows } = await api.database.pool.query('SELECT count(*)::int AS n FROM instances WHERE project_id = $1', [projectId])
    assert.equal(rows[0].n, VCPUS, 'no row of a refused create stays')
  })

  it('charges nothing twice: a create replayed under its Idempotency-Key, or its rows inserted again as its workflow ensures them', async () => {
    await send('PUT', '/v1/projects/q/quotas', { vcpus: VCPUS + 1 }, OPERATOR_TOKEN)
    const key = { 'idempotency-key': `replayed-${randomUUID()}` }
    const first = await send('POST', '/v1/projects/q/instances', create('replayed'), collaborator, key)
    assert.equal(first.statusCode, 202, first.body)
    const again = await send('POST', '/v1/projects/q/instances', create('replayed'), collaborator, key)
    assert.equal(again.statusCode, 202)
    assert.equal(again.headers['idempotency-replayed'], 'true')
    assert.equal((await quotas()).use.vcpus, VCPUS + 1)
    const id = first.json().instance.id as string
    const ensured = await inTransaction(api.database.pool, async (tx) => await insertInstance(tx, id, {
      projectId, name: 'replayed', vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux' }, stopGraceSeconds: 30, restartPolicy: 'never', intendedState: 'stopped'
    }))
    assert.deepEqual(ensured, { inserted: true })
    assert.equal((await quotas()).use.vcpus, VCPUS + 1)
  })

  it('gives a deleted instance\'s charge back only once it is recorded destroyed, and once', async () => {
    const before = (await quotas()).use.vcpus
    const listed = await send('GET', '/v1/projects/q/instances?limit=1')
    const id = listed.json().items[0].id as string
    const deleted = await send('DELETE', `/v1/projects/q/instances/${id}?graceSeconds=0`)
    assert.equal(deleted.statusCode, 202, deleted.body)
    assert.equal((await quotas()).use.vcpus, before, 'still held while its VMMs and disks may exist')
    for (let i = 0; i < 2; i++) {
      await inTransaction(api.database.pool, async (tx) => {
        await updateRuntimeFields(tx, id, { state: 'destroyed', destroyed: true })
        await releaseDevicesOf(tx, id)
      })
    }
    const after = await quotas()
    assert.equal(after.use.vcpus, before - 1)
    assert.equal(after.use.instances, before - 1)
  })

  it('refuses every create while the use is above a lowered limit, and a project that still owns instances is not deleted', async () => {
    await send('PUT', '/v1/projects/q/quotas', { vcpus: 1 }, OPERATOR_TOKEN)
    const refused = await send('POST', '/v1/projects/q/instances', create('over'))
    assert.equal(refused.statusCode, 409)
    assert.deepEqual(refused.json().errors.map((e: { path: string }) => e.path), ['body.vcpus'])
    const kept = await send('DELETE', '/v1/projects/q', undefined, OPERATOR_TOKEN)
    assert.equal(kept.statusCode, 409)
    assert.match(kept.json().detail, /still owns \d+ live instance/)
  })
})
