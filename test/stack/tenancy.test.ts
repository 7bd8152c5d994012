/**
 * Tenancy on the dev stack, over HTTP, with real hosts (docs/design.md §18): two projects, a
 * collaborator's token in each; each runs an instance on the hosts; neither sees, stops nor
 * lists the other's; Temporal lists each project's executions by its `Project` search
 * attribute; the audit trail holds each of their changes once, with its token; and no token's
 * secret is written anywhere the stack keeps or shows things: its components' logs, their
 * metrics, or any row of its database.
 */
import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { parseToken } from '../../api/auth/token-secrets.js'
import pg from 'pg'
import { instanceWorkflowId } from '../../domain/ids.js'
import { waitFor } from '../../stack/wait.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'
import { withTemporalClient } from '../helpers/temporal-client.js'

const PROJECTS = ['red', 'blue'] as const

/** The secret part of a person's token. */
function secretOf (token: string): string {
  return parseToken(token)!.secret
}

describe('tenancy on the dev stack', { timeout: 600_000 }, () => {
  let stack: TestStack
  const tokens: Record<string, string> = {}
  const instances: Record<string, string> = {}
  /** Each change a project's token made, as `METHOD path status`. */
  const changes: Record<string, string[]> = { red: [], blue: [] }

  /** The stack's API as a project's token sees it. */
  function as (project: string) {
    return api({ apiUrl: stack.info.apiUrl, apiToken: tokens[project]! })
  }

  async function change (project: string, method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<{ status: number, body: any }> {
    const answer = await as(project).request(method, path, body)
    changes[project]!.push(`${method} ${path} ${answer.status}`)
    return answer
  }

  before(async () => {
    stack = await startStack()
    for (const [i, project] of PROJECTS.entries()) {
      assert.equal((await api(stack).post('/v1/projects', { name: project })).status, 201)
      const made = await api(stack).post(`/v1/projects/${project}/tokens`, { name: `${project}-team`, role: 'collaborator' })
      assert.equal(made.status, 201, JSON.stringify(made.body))
      tokens[project] = made.body.token
      const network = await change(project, 'POST', `/v1/projects/${project}/networks`, { name: 'default', cidr: `10.9${i}.0.0/24` })
      assert.equal(network.status, 201, JSON.stringify(network.body))
      const created = await change(project, 'POST', `/v1/projects/${project}/instances`, { name: 'app', vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux', initramfs: 'initrd.img' } })
      assert.equal(created.status, 202, JSON.stringify(created.body))
      instances[project] = created.body.instance.id
    }
  })
  after(async () => { await stack?.stop() })

  it('runs each project\'s instance, with its address on its own project\'s network', async () => {
    for (const [i, project] of PROJECTS.entries()) {
      const running = await waitFor(`${project}'s instance running`, async () => {
        const { body } = await as(project).get(`/v1/projects/${project}/instances/${instances[project]}`)
        return body.state === 'running' ? body : null
      }, { timeoutMs: 60_000 })
      assert.match(running.interfaces[0].ip, new RegExp(`^10\\.9${i}\\.0\\.`))
    }
  })

  it('shows neither project the other\'s instance, nor lets it stop it', async () => {
    for (const [project, other] of [['red', 'blue'], ['blue', 'red']] as const) {
      const listed = await as(project).get(`/v1/projects/${project}/instances`)
      assert.deepEqual(listed.body.items.map((i: { id: string }) => i.id), [instances[project]])
      assert.equal((await as(project).get(`/v1/projects/${other}/instances`)).status, 404)
      assert.equal((await as(project).get(`/v1/projects/${project}/instances/${instances[other]}`)).status, 404)
      assert.equal((await change(project, 'POST', `/v1/projects/${project}/instances/${instances[other]}/stop`, {})).status, 404)
      assert.equal((await change(project, 'POST', `/v1/projects/${other}/instances/${instances[other]}/stop`, {})).status, 404)
    }
    for (const project of PROJECTS) {
      const { body } = await as(project).get(`/v1/projects/${project}/instances/${instances[project]}`)
      assert.equal(body.state, 'running', `${project}'s instance was not stopped by the other`)
    }
  })

  it('lists each project\'s executions in Temporal by its Project search attribute', async () => {
    for (const project of PROJECTS) {
      const { body } = await api(stack).get(`/v1/projects/${project}`)
      const listed = await withTemporalClient(stack.info, async (client) => {
        const ids = new Set<string>()
        for await (const execution of client.workflow.list({ query: `Project = '${body.id as string}'` })) ids.add(execution.workflowId)
        return [...ids]
      })
      assert.deepEqual(listed, [instanceWorkflowId(instances[project]!)], project)
    }
  })

  it('records each change a project\'s token made once, with its token and outcome', async () => {
    for (const project of PROJECTS) {
      const { body } = await api(stack).get('/v1/audit?limit=500')
      const mine = (body.items as Array<{ tokenName: string, method: string, path: string, status: number }>)
        .filter((event) => event.tokenName === `${project}-team`)
        .map((event) => `${event.method} ${event.path} ${event.status}`)
      assert.deepEqual(mine.sort(), [...changes[project]!].sort())
    }
  })

  it('writes no token\'s secret into any log of the stack, any metric, or any row of its database', async () => {
    const secrets = [...Object.values(tokens), stack.info.apiToken, stack.info.viewerToken, stack.info.agentToken]
    const personal = Object.values(tokens).map((token) => secretOf(token))
    for (const file of await readdir(stack.paths.logDir)) {
      const text = await readFile(join(stack.paths.logDir, file), 'utf8')
      for (const secret of personal) assert.equal(text.includes(secret), false, `a token's secret is in ${file}`)
      // The environment's tokens are in the stack's files for its operators; never in a log.
      for (const secret of secrets) assert.equal(text.includes(secret), false, `a token is in ${file}`)
    }
    for (const [component, url] of Object.entries(stack.info.metricsUrls)) {
      const text = await (await fetch(url)).text()
      for (const secret of [...personal, ...secrets]) assert.equal(text.includes(secret), false, `a token is in ${component}'s metrics`)
    }
    const client = new pg.Client({ connectionString: stack.info.databaseUrl })
    await client.connect()
    try {
      const { rows: tables } = await client.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
      for (const { tablename } of tables) {
        const { rows } = await client.query(`SELECT row_to_json(t)::text AS row FROM "${tablename}" t`)
        const text = rows.map((r) => r.row as string).join('\n')
        for (const secret of [...personal, ...secrets]) assert.equal(text.includes(secret), false, `a token is in the table ${tablename}`)
      }
    } finally {
      await client.end()
    }
  })
})
