/**
 * The CI-sized crash campaign (test/helpers/crash-campaign.ts) on the stack's cluster shape: Temporal's
 * own server on the stack's PostgreSQL, two API replicas behind HAProxy and two workers. Instances
 * are created, stopped and deleted across 4 hosts while, twice a phase, a worker replica, an API
 * replica and Temporal's server are SIGKILLed, and once a phase PostgreSQL is SIGKILLed and once
 * restarted cleanly (SIGINT, then the stack starts it again), each at a random moment; the worker
 * is frozen past the workflow task timeout once a phase. Nothing leaks or is left half-done, every
 * execution's history replays, and no component's process ends but those the campaign ends.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { CAMPAIGN_STACK_ENV, CLUSTER_STRIKES, runCampaign } from '../helpers/crash-campaign.js'
import { assertNothingWrong, devicePointKills } from '../helpers/campaign.js'
import { startStack, type TestStack } from '../helpers/stack.js'

const ROUNDS = 2

describe('the crash campaign on the cluster shape', { timeout: 25 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ temporal: 'cluster', hosts: 4, env: CAMPAIGN_STACK_ENV }) })
  after(async () => { await stack?.stop() })

  it('creates, stops and deletes 24 instances through SIGKILLs of worker and API replicas and Temporal, and PostgreSQL\'s restarts, and leaks nothing', async () => {
    const report = await runCampaign(stack, {
      instances: 24,
      concurrency: 6,
      strikes: CLUSTER_STRIKES,
      crashesPerPhase: ROUNDS,
      freezesPerPhase: 1,
      convergeTimeoutMs: 180_000,
      log: (line) => console.log(line)
    })
    for (const [name, phase] of Object.entries(report.phases)) {
      console.log(`${name}: converged in ${phase.convergedSeconds.toFixed(1)} s, ${phase.retries} requests sent again; ${phase.kills.join('; ')}`)
      const struck = (pattern: RegExp): number => phase.kills.filter((kill) => pattern.test(kill)).length
      const atDevicePoints = devicePointKills(name, phase)
      assert.equal(struck(/^worker(-2)? \(pid \d+\) after/), ROUNDS, phase.kills.join('; '))
      assert.equal(struck(/^api(-2)? \(pid \d+\) after/), ROUNDS, phase.kills.join('; '))
      assert.equal(struck(/^temporal \(pid \d+\) after/), ROUNDS, phase.kills.join('; '))
      assert.equal(struck(/^postgres \(pid \d+\) after/), 1, phase.kills.join('; '))
      assert.equal(struck(/^postgres \(pid \d+, SIGINT\) after/), 1, phase.kills.join('; '))
      assert.equal(struck(/^worker frozen/), 1, phase.kills.join('; '))
      assert.equal(phase.kills.length, atDevicePoints + 3 * ROUNDS + 3, phase.kills.join('; '))
    }
    console.log(`${report.replayed} executions replayed; the reconciler: ${JSON.stringify(report.reconcilerActions)}`)
    assertNothingWrong(report)
  })
})
