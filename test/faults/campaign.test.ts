/**
 * The CI-sized crash campaign (scripts/campaign/campaign.ts): instances with disks, an interface
 * and cloud-init created, stopped and deleted across 4 hosts while the worker and host agents are
 * SIGKILLed, and the worker frozen past the workflow task timeout, at random moments (and, while
 * creating, right after an agent made a disk or a TAP); no orphan VMM, disk or TAP, no duplicate
 * VMM, address or MAC, no leaked reservation or address, every instance where it was meant to be,
 * every execution's history replays, and no process ends but those the campaign kills.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { CAMPAIGN_STACK_ENV, runCampaign } from '../../scripts/campaign/campaign.js'
import { startStack, type TestStack } from '../helpers/stack.js'

const ZERO = {
  orphanVmms: 0,
  duplicateVmms: 0,
  leakedReservations: 0,
  orphanDisks: 0,
  orphanTaps: 0,
  leakedAddresses: 0,
  duplicateAddresses: 0,
  notAtIntent: 0,
  operationsInFlight: 0
}
/** The create phase's kills at the agents' device points (campaign.ts `killAtDevicePoints`). */
const DEVICE_POINT_KILLS = 4

describe('the crash campaign', { timeout: 20 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 4, env: CAMPAIGN_STACK_ENV }) })
  after(async () => { await stack?.stop() })

  it('creates, stops and deletes 24 instances through crashes of the worker and host agents and a frozen worker, and leaks nothing', async () => {
    const report = await runCampaign(stack, {
      instances: 24,
      concurrency: 6,
      crashesPerPhase: 2,
      freezesPerPhase: 1,
      convergeTimeoutMs: 180_000,
      log: (line) => console.log(line)
    })
    for (const [name, phase] of Object.entries(report.phases)) {
      const atDevicePoints = phase.kills.filter((kill) => / at agent\.(disk|tap)\.after-create$/.test(kill))
      assert.equal(atDevicePoints.length, name === 'create' ? DEVICE_POINT_KILLS : 0, phase.kills.join('; '))
      assert.equal(phase.kills.length - atDevicePoints.length, 5, phase.kills.join('; '))
      assert.equal(phase.kills.filter((kill) => kill.startsWith('worker frozen')).length, 1, phase.kills.join('; '))
      assert.ok(phase.converged, `${name} converged`)
    }
    assert.deepEqual(report.afterCreate, ZERO, report.violations.join('\n'))
    assert.deepEqual(report.afterRun, ZERO, report.violations.join('\n'))
    assert.deepEqual(report.notReplaying, [], `of ${report.replayed} executions`)
    assert.deepEqual(report.unexpectedExits, [])
  })
})
