/**
 * The CI-sized crash campaign (test/helpers/crash-campaign.ts): instances with disks, an interface
 * and cloud-init created, stopped and deleted across 4 hosts while the worker and host agents are
 * SIGKILLed, and the worker frozen past the workflow task timeout, at random moments (and, while
 * creating, right after an agent made a disk or a TAP); no orphan VMM, disk or TAP, no duplicate
 * VMM, address or MAC, no leaked reservation or address, every instance where it was meant to be,
 * every execution's history replays, and no process ends but those the campaign kills.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { CAMPAIGN_STACK_ENV, DEV_STRIKES, runCampaign } from '../helpers/crash-campaign.js'
import { assertNothingWrong, devicePointKills } from '../helpers/campaign.js'
import { startStack, type TestStack } from '../helpers/stack.js'

describe('the crash campaign', { timeout: 20 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 4, env: CAMPAIGN_STACK_ENV }) })
  after(async () => { await stack?.stop() })

  it('creates, stops and deletes 24 instances through crashes of the worker and host agents and a frozen worker, and leaks nothing', async () => {
    const report = await runCampaign(stack, {
      instances: 24,
      concurrency: 6,
      strikes: DEV_STRIKES,
      crashesPerPhase: 2,
      freezesPerPhase: 1,
      convergeTimeoutMs: 180_000,
      log: (line) => console.log(line)
    })
    for (const [name, phase] of Object.entries(report.phases)) {
      const atDevicePoints = devicePointKills(name, phase)
      assert.equal(phase.kills.length - atDevicePoints, 5, phase.kills.join('; '))
      assert.equal(phase.kills.filter((kill) => kill.startsWith('worker frozen')).length, 1, phase.kills.join('; '))
    }
    assertNothingWrong(report)
  })
})
