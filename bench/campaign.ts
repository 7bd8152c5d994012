/**
 * `npm run campaign [-- --instances N --concurrency C --crashes K | --full] [--cluster]`: the crash
 * campaign (test/helpers/crash-campaign.ts) on a stack of its own with 4 hosts, of the dev shape or,
 * with `--cluster`, of the cluster shape (its strikes `CLUSTER_STRIKES`). The default size is CI's;
 * `--full` is the 4,000-instance run whose report the README shows. Prints the report, writes
 * bench/results/campaign-<time>.json, and exits non-zero if any count is not 0.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { CAMPAIGN_STACK_ENV, CLUSTER_STRIKES, DEV_STRIKES, runCampaign, type CampaignReport, type InvariantCounts } from '../test/helpers/crash-campaign.js'
import { launchStack } from '../test/helpers/launcher.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import { ensureTemporalTools } from '../scripts/tools/temporal-tools.js'
import { describeMachine } from './machine.js'

const { values } = parseArgs({
  options: {
    full: { type: 'boolean', default: false },
    instances: { type: 'string' },
    concurrency: { type: 'string' },
    crashes: { type: 'string' },
    cluster: { type: 'boolean', default: false }
  }
})
const size = values.full ? { instances: 4000, concurrency: 50, crashes: 5 } : { instances: 40, concurrency: 10, crashes: 2 }
const instances = positive('instances', values.instances ?? size.instances)
const concurrency = positive('concurrency', values.concurrency ?? size.concurrency)
const crashes = positive('crashes', values.crashes ?? size.crashes)

const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
const stack = await launchStack({ outputDir: join(REPO_ROOT, 'test-output', 'campaign'), hosts: 4, temporal: values.cluster ? 'cluster' : 'dev', env: CAMPAIGN_STACK_ENV })
let report: CampaignReport
try {
  report = await runCampaign(stack, {
    instances,
    concurrency,
    strikes: values.cluster ? CLUSTER_STRIKES : DEV_STRIKES,
    crashesPerPhase: crashes,
    freezesPerPhase: 1,
    convergeTimeoutMs: 180_000,
    log: (line) => console.log(`${new Date().toISOString()} ${line}`)
  })
} finally {
  await stack.stop()
}
printReport(report)
const file = join(REPO_ROOT, 'bench', 'results', `campaign-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
await mkdir(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
await writeFile(file, JSON.stringify({ ...report, machine: describeMachine(temporal) }, null, 2) + '\n')
console.log(`\nwrote ${file}`)
process.exit(report.violations.length === 0 ? 0 : 1)

function positive (name: string, value: string | number): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--${name} must be a positive whole number, not ${value}`)
    process.exit(2)
  }
  return n
}

function printReport (r: CampaignReport): void {
  console.log(`\ncrash campaign: ${r.instances} instances over ${r.hosts} hosts, ${r.concurrency} requests at a time`)
  console.log(`${'phase'.padEnd(8)} ${'converged'.padStart(10)} ${'inst/s'.padStart(8)} ${'retries'.padStart(8)}  kills`)
  for (const [name, p] of Object.entries(r.phases)) {
    console.log(`${name.padEnd(8)} ${`${p.converged ? '' : 'NOT '}${p.convergedSeconds.toFixed(1)} s`.padStart(10)} ${p.perSecond.toFixed(1).padStart(8)} ${String(p.retries).padStart(8)}  ${p.kills.length}: ${p.kills.join('; ')}`)
  }
  const rows: Array<[string, keyof InvariantCounts]> = [
    ['orphan VMMs', 'orphanVmms'], ['duplicate VMMs', 'duplicateVmms'], ['leaked reservations', 'leakedReservations'],
    ['orphan disks', 'orphanDisks'], ['orphan TAPs', 'orphanTaps'], ['orphan segments', 'orphanSegments'], ['firewall drift', 'firewallDrift'], ['leaked addresses', 'leakedAddresses'],
    ['duplicate addresses', 'duplicateAddresses'], ['not at intended state', 'notAtIntent'], ['operations in flight', 'operationsInFlight']
  ]
  console.log(`\n${'count (target 0)'.padEnd(24)} ${'all running'.padStart(12)} ${'after run'.padStart(10)}`)
  for (const [label, key] of rows) console.log(`${label.padEnd(24)} ${String(r.afterCreate[key]).padStart(12)} ${String(r.afterRun[key]).padStart(10)}`)
  console.log(`${'not replaying'.padEnd(24)} ${''.padStart(12)} ${String(r.notReplaying.length).padStart(10)}  (of ${r.replayed} executions)`)
  console.log(`\nreconciler actions: ${Object.entries(r.reconcilerActions).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`)
  if (r.violations.length > 0) console.log(`\nviolations:\n${r.violations.join('\n')}`)
}
