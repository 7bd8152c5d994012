/**
 * docker-compose.yml, checked by Docker Compose itself: `docker compose config` parses the file,
 * validates it against the Compose specification and substitutes the variables, all without a
 * Docker engine. What it renders must hold the whole multi-machine shape, and match what the
 * tests run as the dev stack's cluster shape: Temporal's server and UI at the versions built for
 * it, its history shards, its schema steps and registrations, the replicas and HAProxy's
 * configuration.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { composeBalancerConfig } from '../../stack/api-balancer.js'
import { HISTORY_SHARDS } from '../../stack/temporal-cluster.js'
import { TEMPORAL_DATABASES } from '../../stack/temporal-schemas.js'
import { pinnedVersions } from '../../scripts/tools/go-tools.js'
import { SEARCH_ATTRIBUTE_KEYS } from '../../contract/search-attributes.js'
import { findCompose, type ComposeCommand } from '../../scripts/tools/compose.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

const COMPOSE_FILE = join(REPO_ROOT, 'docker-compose.yml')
const TOKENS = { VMPLANE_API_TOKEN: 'api-token-for-the-compose-test', VMPLANE_AGENT_TOKEN: 'agent-token-for-the-compose-test' }

interface Service {
  image?: string
  build?: unknown
  command?: string[]
  environment?: Record<string, string>
  deploy?: { replicas?: number }
  devices?: Array<string | { source: string }>
  depends_on?: Record<string, { condition: string }>
  healthcheck?: unknown
}

interface Result {
  code: number
  stdout: string
  stderr: string
}

describe('docker-compose.yml', () => {
  let compose: ComposeCommand
  before(async () => {
    const found = await findCompose()
    if (found === null) {
      throw new Error('no Docker Compose v2: `npm test` builds it into .tools/bin (scripts/tools/compose.ts), or install the Docker Compose plugin')
    }
    compose = found
  })

  /** `compose -f docker-compose.yml config …` with only these variables (and PATH, HOME) set. */
  function config (env: Record<string, string>, ...args: string[]): Promise<Result> {
    return new Promise((resolve) => {
      execFile(compose.command, [...compose.args, '-f', COMPOSE_FILE, 'config', ...args], {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
        timeout: 60_000
      }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr })
      })
    })
  }

  it('renders every service of the multi-machine shape: Temporal on PostgreSQL, two APIs behind HAProxy, two workers', async () => {
    const services = await rendered()
    assert.deepEqual(Object.keys(services).sort(), [
      'api-balancer', 'host-agent', 'postgresql', 'temporal', 'temporal-admin-tools', 'temporal-schema', 'temporal-ui',
      'vmplane-api', 'vmplane-migrate', 'vmplane-worker'
    ])

    assert.match(services.postgresql.image ?? '', /^postgres:/)
    assert.equal(services.temporal.environment?.DB, 'postgres12', 'Temporal persists in PostgreSQL')
    assert.equal(services.temporal.environment?.POSTGRES_SEEDS, 'postgresql')
    assert.equal(services['temporal-schema'].depends_on?.postgresql?.condition, 'service_healthy')
    assert.equal(services.temporal.depends_on?.['temporal-schema']?.condition, 'service_completed_successfully', 'the server starts on schemas at version')
    assert.ok(services['temporal-admin-tools'].healthcheck !== undefined, 'admin tools report when the namespace and search attributes exist')
    assert.equal(services['vmplane-api'].deploy?.replicas, 2)
    assert.equal(services['vmplane-worker'].deploy?.replicas, 2)
  })

  it('runs what the cluster shape\'s tests run', async () => {
    const services = await rendered()
    const versions = await pinnedVersions()
    const server = versions.temporalServer.version.replace(/^v/, '')
    assert.equal(services.temporal.image, `temporalio/server:${server}`, 'the server version the stack builds')
    assert.equal(services['temporal-schema'].image, `temporalio/admin-tools:${server}`)
    assert.equal(services['temporal-admin-tools'].image, `temporalio/admin-tools:${server}`)
    assert.equal(services['temporal-ui'].image, `temporalio/ui:${versions.temporalUi.version.replace(/^v/, '')}`)
    assert.equal(services.temporal.environment?.NUM_HISTORY_SHARDS, String(HISTORY_SHARDS))
    assert.equal(services.temporal.environment?.POSTGRES_USER, services['temporal-schema'].environment?.SQL_USER)

    const schemaJob = services['temporal-schema'].command?.join(' ') ?? ''
    for (const { name, schema } of Object.values(TEMPORAL_DATABASES)) assert.ok(schemaJob.includes(`${name}:${schema}`), `the schema job brings ${name} to ${schema}`)
    const registration = services['temporal-admin-tools'].command?.join(' ') ?? ''
    assert.match(registration, /namespace create --namespace default/)
    const registered = /for name in ([\w ]+); do/.exec(registration)?.[1]?.trim().split(/\s+/)
    assert.deepEqual(registered, SEARCH_ATTRIBUTE_KEYS.map((key) => key.name), 'the search attributes the workflows set')

    assert.equal(await readFile(join(REPO_ROOT, 'config', 'haproxy.cfg'), 'utf8'), composeBalancerConfig(), 'HAProxy is configured as the dev stack\'s')
  })

  async function rendered (): Promise<Record<string, Service>> {
    const result = await config(TOKENS, '--format', 'json')
    assert.equal(result.code, 0, result.stderr)
    return (JSON.parse(result.stdout) as { services: Record<string, Service> }).services
  }

  it('has the multi-machine shape\'s vmplane services, with their tokens', async () => {
    const services = await rendered()
    // The agent, the API and the worker bundled (scripts/build/bundle-entry-points.mjs), as the dev stack runs them.
    for (const [name, entry] of [['vmplane-migrate', 'bin/migrate'], ['vmplane-api', 'bundle/api'], ['vmplane-worker', 'bundle/worker'], ['host-agent', 'bundle/agent']]) {
      assert.ok(services[name].build !== undefined, `${name} is built from the Dockerfile`)
      assert.deepEqual(services[name].command, ['node', `dist/${entry}.js`])
    }
    for (const name of ['vmplane-api', 'vmplane-worker']) {
      assert.equal(services[name].depends_on?.['vmplane-migrate']?.condition, 'service_completed_successfully', `${name} waits for the migration`)
      assert.equal(services[name].depends_on?.['temporal-admin-tools']?.condition, 'service_healthy', `${name} waits for the search attributes`)
    }
    assert.equal(services['vmplane-api'].environment?.VMPLANE_API_TOKEN, TOKENS.VMPLANE_API_TOKEN)
    assert.equal(services['vmplane-worker'].environment?.VMPLANE_AGENT_TOKEN, TOKENS.VMPLANE_AGENT_TOKEN)
    assert.equal(services['host-agent'].environment?.VMPLANE_AGENT_TOKEN, TOKENS.VMPLANE_AGENT_TOKEN)
    assert.equal(services['host-agent'].environment?.VMPLANE_API_TOKEN, undefined, 'the API token stays off the hosts')
    assert.equal(services['vmplane-api'].environment?.VMPLANE_API_VIEWER_TOKEN, '', 'the viewer token is optional')
    assert.equal(services['vmplane-worker'].environment?.VMPLANE_WORKER_METRICS_HOST, '0.0.0.0', 'the worker serves metrics beyond its container')

    const devices = (services['host-agent'].devices ?? []).map((device) => typeof device === 'string' ? device.split(':')[0] : device.source)
    assert.deepEqual(devices, ['/dev/kvm'], 'the host agent gets /dev/kvm')
  })

  for (const variable of Object.keys(TOKENS) as Array<keyof typeof TOKENS>) {
    it(`refuses to render without ${variable}, naming it`, async () => {
      const { [variable]: _left, ...others } = TOKENS
      const result = await config(others)
      assert.notEqual(result.code, 0, 'compose config succeeded without the token')
      assert.match(result.stderr, new RegExp(`\\b${variable}\\b`))
    })
  }
})
