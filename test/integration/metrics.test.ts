/**
 * Every component serves Prometheus metrics where the stack says (`metricsUrls` in its stack
 * file, printed by `npm start`): the API its requests by route and status, the worker Temporal's
 * SDK metrics and the operations' outcomes, each host agent its VMMs, kills, report lag and
 * outbox depth. Each figure asserted here was caused by the test itself.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { runningInstance, waitForState } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'
import { waitFor } from '../../stack/wait.js'

/** The value of the sample whose name and labels match exactly, or null if there is none. */
function sample (text: string, name: string, labels: Record<string, string>): number | null {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null || match[1] !== name) continue
    const present = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]))
    if (Object.entries(labels).every(([key, value]) => present[key] === value)) return Number(match[3])
  }
  return null
}

async function scrape (url: string): Promise<string> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) })
  assert.equal(response.status, 200, url)
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain/)
  return await response.text()
}

describe('metrics', () => {
  let stack: TestStack
  before(async () => {
    stack = await startStack({ hosts: 1 })
    // The guest ignores the power button, so the agent, told the deadline with the first press,
    // kills its VMM then (the workflow kills only if the agent has not, a moment later).
    const instanceId = (await runningInstance(stack, 'measured', 'sim.ignore_power_button')).id
    await api(stack).post(`/v1/instances/${instanceId}/stop`, { graceSeconds: 5 })
    await waitForState(stack, instanceId, 'stopped')
  })
  after(async () => { await stack?.stop() })

  it('the stack file names an endpoint for the API, the worker and every host agent', () => {
    assert.deepEqual(Object.keys(stack.info.metricsUrls).sort(), ['agent-host-1', 'api', 'worker'])
  })

  it('the API counts requests and their durations by route and status, without a token', async () => {
    await api(stack).get('/v1/instances/00000000-0000-4000-8000-000000000000')
    const text = await scrape(stack.info.metricsUrls.api!)
    const created = sample(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/v1/instances', status_code: '202' })
    assert.ok(created !== null && created >= 1, 'no count of POST /v1/instances answered 202')
    const missing = sample(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/v1/instances/:id', status_code: '404' })
    assert.ok(missing !== null && missing >= 1, 'no count of GET /v1/instances/:id answered 404')
  })

  it('the worker serves the Temporal SDK metrics and each operation outcome by kind', async () => {
    const text = await waitFor('the stop outcome in the worker metrics', async () => {
      const body = await scrape(stack.info.metricsUrls.worker!)
      return sample(body, 'vmplane_operations_finished_total', { kind: 'stop', status: 'succeeded' }) === null ? null : body
    }, { timeoutMs: 30_000 })
    assert.ok((sample(text, 'vmplane_operations_finished_total', { kind: 'create', status: 'succeeded' }) ?? 0) >= 1)
    assert.ok((sample(text, 'vmplane_operation_duration_seconds_count', { kind: 'create', status: 'succeeded' }) ?? 0) >= 1)
    assert.match(text, /^temporal_workflow_completed\w*\{/m, 'no Temporal SDK workflow metrics')
  })

  it('a host agent counts its VMMs by state, kills by cause, report lag and outbox depth', async () => {
    const text = await scrape(stack.info.metricsUrls['agent-host-1']!)
    assert.equal(sample(text, 'vmplane_agent_vmms', { state: 'destroyed' }), 1)
    assert.equal(sample(text, 'vmplane_agent_vmms', { state: 'running' }), null)
    assert.equal(sample(text, 'vmplane_agent_vmm_kills_total', { cause: 'stop-deadline' }), 1)
    assert.ok((sample(text, 'vmplane_agent_report_lag_seconds_count', {}) ?? 0) >= 2, 'reports of running and stopped were accepted')
    assert.equal(sample(text, 'vmplane_agent_outbox_depth', {}), 0)
  })
})
