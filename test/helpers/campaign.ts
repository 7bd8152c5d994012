/**
 * What every crash campaign test (test/faults/campaign*.test.ts) asserts of its report, beyond
 * its own strikes.
 */
import assert from 'node:assert/strict'
import type { CampaignReport, InvariantCounts, PhaseReport } from './crash-campaign.js'

const NOTHING_WRONG: InvariantCounts = {
  orphanVmms: 0,
  duplicateVmms: 0,
  leakedReservations: 0,
  orphanDisks: 0,
  orphanTaps: 0,
  orphanSegments: 0,
  firewallDrift: 0,
  leakedAddresses: 0,
  duplicateAddresses: 0,
  notAtIntent: 0,
  operationsInFlight: 0
}
/** The create phase's kills at the agents' device points (campaign.ts `killAtDevicePoints`). */
const DEVICE_POINT_KILLS = 4

/** The phase's kills at the agents' device points, which only the create phase makes, all of them. */
export function devicePointKills (name: string, phase: PhaseReport): number {
  const kills = phase.kills.filter((kill) => / at agent\.(disk|tap)\.after-create$/.test(kill)).length
  assert.equal(kills, name === 'create' ? DEVICE_POINT_KILLS : 0, phase.kills.join('; '))
  return kills
}

/**
 * Every phase converged; every invariant count 0 with every instance running and after the run;
 * every execution replays; no process ended but those the campaign ended.
 */
export function assertNothingWrong (report: CampaignReport): void {
  for (const [name, phase] of Object.entries(report.phases)) assert.ok(phase.converged, `${name} converged; not: ${phase.pending.join('; ')}`)
  assert.deepEqual(report.afterCreate, NOTHING_WRONG, report.violations.join('\n'))
  assert.deepEqual(report.afterRun, NOTHING_WRONG, report.violations.join('\n'))
  assert.deepEqual(report.notReplaying, [], `of ${report.replayed} executions`)
  assert.deepEqual(report.unexpectedExits, [])
}
