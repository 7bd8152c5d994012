/**
 * A project's quota under a burst, on real processes (docs/design.md §18): 50 creates of 1 vCPU
 * at once against a quota of 10 vCPUs, while the worker is killed and then frozen, take exactly 10,
 * refuse the other 40 naming the quota, and the use reads exactly 10 once every accepted instance
 * runs. Their deletes give the quota back only as each instance is recorded destroyed: sampled
 * every 100 ms in one statement, the project's use never differs from its instances not destroyed.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { waitFor } from '../../stack/wait.js'
import { DISKLESS, newInstance } from '../helpers/instances.js'
import { startFaultStack, settled } from '../helpers/fault-stack.js'
import { api, type TestStack } from '../helpers/stack.js'

const CREATES = 50
const VCPUS = 10
const FROZEN_MS = 5_000

describe('a project\'s quota under a burst, its worker killed and frozen', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  let db: pg.Client
  let projectId: string
  let token: string
  const accepted: string[] = []

  /** The stack's API as the project's collaborator sees it. */
  const project = () => api({ apiUrl: stack.info.apiUrl, apiToken: token })

  /** The project's use and its instances not destroyed, read together. */
  async function useAndLive (): Promise<{ used: number, live: number, vcpus: number }> {
    const { rows } = await db.query(
      `SELECT q.used_instances AS used, q.used_vcpus AS vcpus,
              (SELECT count(*)::int FROM instances WHERE project_id = $1 AND destroyed_at IS NULL) AS live
         FROM project_quotas q WHERE q.project_id = $1`,
      [projectId]
    )
    return rows[0]
  }

  before(async () => {
    stack = await startFaultStack(2)
    db = new pg.Client({ connectionString: stack.info.databaseUrl })
    await db.connect()
    const made = await api(stack).post('/v1/projects', { name: 'burst' })
    assert.equal(made.status, 201, JSON.stringify(made.body))
    projectId = made.body.id
    assert.equal((await api(stack).request('PUT', '/v1/projects/burst/quotas', { vcpus: VCPUS })).status, 200)
    token = (await api(stack).post('/v1/projects/burst/tokens', { name: 'burst-team', role: 'collaborator' })).body.token
  })
  after(async () => {
    await db?.end()
    await stack?.stop()
  })

  it(`accepts exactly ${VCPUS} of ${CREATES} creates sent at once, through a worker killed and frozen, and reads exactly ${VCPUS} in use`, async () => {
    const faults = (async () => {
      await sleep(200)
      await stack.kill('worker', 'SIGKILL')
      await sleep(1_000)
      await stack.kill('worker', 'SIGSTOP')
      await sleep(FROZEN_MS)
      await stack.kill('worker', 'SIGCONT')
    })()
    const answers = await Promise.all(Array.from({ length: CREATES }, async (_, i) => {
      const key = { 'idempotency-key': randomUUID() }
      // An answer lost to a timeout is asked again under its key, as the contract says.
      for (;;) {
        const answer = await project().request('POST', '/v1/projects/burst/instances', { ...newInstance(`burst-${i}`), ...DISKLESS }, key).catch(() => null)
        if (answer !== null && answer.status < 500) return answer
        await sleep(500)
      }
    }))
    await faults
    const statuses = answers.map((a) => a.status)
    assert.equal(statuses.filter((s) => s === 202).length, VCPUS, statuses.join(' '))
    assert.equal(statuses.filter((s) => s === 409).length, CREATES - VCPUS, statuses.join(' '))
    for (const answer of answers.filter((a) => a.status === 409)) assert.match(answer.body.detail, /the project's quota on vcpus is 10: 10 in use/)
    accepted.push(...answers.filter((a) => a.status === 202).map((a) => a.body.instance.id as string))
    for (const id of accepted) {
      await waitFor(`instance ${id} running`, async () => {
        const { body } = await project().get(`/v1/projects/burst/instances/${id}`)
        return body.state === 'running' && body.operation === null ? true : null
      }, { timeoutMs: 120_000 })
    }
    assert.deepEqual(await useAndLive(), { used: VCPUS, live: VCPUS, vcpus: VCPUS })
  })

  it('gives each deleted instance\'s share back only as it is recorded destroyed, never before', async () => {
    const samples: Array<{ used: number, live: number }> = []
    const sampling = new AbortController()
    const sampler = (async () => {
      while (!sampling.signal.aborted) {
        samples.push(await useAndLive())
        await sleep(100)
      }
    })()
    for (const id of accepted) assert.equal((await project().delete(`/v1/projects/burst/instances/${id}?graceSeconds=0`)).status, 202)
    await waitFor('every deleted instance destroyed', async () => (await useAndLive()).live === 0 ? true : null, { timeoutMs: 120_000 })
    sampling.abort()
    await sampler
    const apart = samples.filter((s) => s.used !== s.live)
    console.log(`quota use sampled ${samples.length} times while ${accepted.length} instances were deleted; ${apart.length} apart from the instances not destroyed`)
    assert.deepEqual(apart, [])
    assert.deepEqual(await useAndLive(), { used: 0, live: 0, vcpus: 0 })
    await settled(stack)
  })
})
