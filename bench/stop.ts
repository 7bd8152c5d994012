/**
 * `npm run bench:stop [-- --runs N] [--temporal dev|cluster] [--workers N] [--case text]`: how far
 * past its grace period a stop ends (I1), on the dev shape with one worker unless told otherwise
 * (the cluster shape runs two), for every case or those whose name contains `text`.
 *
 * For grace periods of 0, 2 and 10 s and each hard case — a guest that ignores the power button,
 * a VMM whose API hangs, one wedged on SIGTERM, a boot that never completes, a host agent or the
 * worker killed during the stop, a second stop with the shorter grace — N instances (5) are
 * stopped together through the HTTP API, and the time from the stop request to the API showing
 * `stopped` is measured for each. The overshoot is that time minus the grace period. A guest that
 * honours the power button is measured too, as the baseline (it ends before its grace period).
 * Prints a table and writes bench/results/stop-<time>.json.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { HostAgentClient } from '../http/host-agent-client.js'
import { api, launchStack, type LaunchedStack } from '../test/helpers/launcher.js'
import { replicasOf } from '../stack/stack-file.js'
import { waitFor } from '../stack/wait.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import { ensureTemporalTools } from '../scripts/tools/temporal-tools.js'
import { describeMachine } from './machine.js'
import { percentile, round } from './stats.js'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    temporal: { type: 'string', default: 'dev' },
    workers: { type: 'string' },
    case: { type: 'string', default: '' }
  }
})
const RUNS = Number(values.runs)
if (values.temporal !== 'dev' && values.temporal !== 'cluster') throw new Error(`--temporal: dev or cluster, not ${values.temporal}`)
const SHAPE: 'dev' | 'cluster' = values.temporal
const GRACES = [0, 2, 10]
const POLL_MS = 25
/** How long after the stop requests a case disturbs the stop (kills a component, stops again). */
const DISTURB_AFTER_MS = 300

interface Case {
  name: string
  cmdline: string
  /** The boot never completes: stop the instance while it is starting. */
  stuckBoot?: boolean
  /** Waits after the instance runs, for the fault to set in. */
  settleMs?: number
  /** Done to the stack while the stops are in flight. */
  disturb?: (stack: LaunchedStack, ids: string[], grace: number) => Promise<void>
  /** A first stop with this grace period, shortened by the measured one. */
  firstGraceSeconds?: number
}

const CASES: Case[] = [
  { name: 'graceful guest (baseline)', cmdline: '' },
  { name: 'guest ignores the power button', cmdline: 'sim.ignore_power_button' },
  { name: 'VMM API hangs', cmdline: 'sim.hang_api_after_ms=100', settleMs: 300 },
  { name: 'VMM wedged on SIGTERM', cmdline: 'sim.ignore_sigterm sim.ignore_power_button' },
  { name: 'boot never completes', cmdline: 'sim.boot_ms=never', stuckBoot: true },
  {
    name: 'host agent killed during the stop',
    cmdline: 'sim.ignore_power_button',
    disturb: async (stack) => {
      for (const host of stack.info.hosts) await stack.kill(`agent-${host.id}`)
    }
  },
  { name: 'worker killed during the stop', cmdline: 'sim.ignore_power_button', disturb: async (stack) => { await stack.kill('worker') } },
  { name: 'second stop, shorter grace', cmdline: 'sim.ignore_power_button', firstGraceSeconds: 60 }
]

const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
// No rate limit: the bench polls each instance every 25 ms, past the API's default limit, which
// would answer 429 and hold its figures back by the limit's window.
const stack = await launchStack({
  outputDir: join(REPO_ROOT, 'test-output', 'bench'),
  temporal: SHAPE,
  ...(values.workers === undefined ? {} : { workerReplicas: Number(values.workers) }),
  env: { VMPLANE_POWER_BUTTON_INTERVAL_SECONDS: '1', VMPLANE_API_RATE_LIMIT: '100000000' }
})
const workers = replicasOf(stack.info, 'worker').length
const agents = new HostAgentClient({ token: stack.info.agentToken, timeoutMs: 5000 })
let serial = 0
try {
  const results: Record<string, Record<string, { p50Ms: number, p99Ms: number, maxMs: number }>> = {}
  console.log(`Temporal: ${SHAPE}; ${workers} worker(s); ${stack.info.apiUrls.length} API(s)`)
  for (const c of CASES.filter((c) => c.name.includes(values.case))) {
    results[c.name] = {}
    for (const grace of GRACES) {
      const overshoots = await measureCase(c, grace)
      results[c.name][`grace${grace}s`] = {
        p50Ms: round(percentile(overshoots, 50)),
        p99Ms: round(percentile(overshoots, 99)),
        maxMs: round(Math.max(...overshoots))
      }
      console.log(`${c.name}, grace ${grace} s: overshoot p50 ${results[c.name][`grace${grace}s`].p50Ms} ms, p99 ${results[c.name][`grace${grace}s`].p99Ms} ms`)
    }
  }
  printTable(results)
  const file = join(REPO_ROOT, 'bench', 'results', `stop-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
  await mkdir(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
  await writeFile(file, JSON.stringify({ runs: RUNS, temporal: SHAPE, workers, overshoot: results, machine: describeMachine(temporal) }, null, 2) + '\n')
  console.log(`\nwrote ${file}`)
} finally {
  await stack.stop()
}

async function instance (id: string): Promise<{ state: string, operation: unknown, vmm: { id: string, hostId: string } | null }> {
  return (await api(stack).get(`/v1/instances/${id}`)).body
}

/** Whether the VMM's host agent has it: its record exists and its process is being started. */
async function agentHas (vmm: { id: string, hostId: string }): Promise<boolean> {
  const host = stack.info.hosts.find((h) => h.id === vmm.hostId)
  return host !== undefined && await agents.findVmm(host.url, vmm.id) !== null
}

/** Creates RUNS instances of the case, stops them together, and returns each one's overshoot in ms. */
async function measureCase (c: Case, grace: number): Promise<number[]> {
  const ids = await Promise.all(Array.from({ length: RUNS }, async () => {
    const { body } = await api(stack).post('/v1/instances', {
      name: `stop-${serial++}`, vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux', cmdline: c.cmdline }
    })
    return body.instance.id as string
  }))
  await Promise.all(ids.map((id) => waitFor(`${id} ready to stop`, async () => {
    const i = await instance(id)
    // A stuck boot is stopped once its agent has the VMM.
    const ready = c.stuckBoot === true
      ? i.state === 'starting' && i.vmm !== null && await agentHas(i.vmm)
      : i.state === 'running' && i.operation === null
    return ready ? true : null
  }, { timeoutMs: 60_000, intervalMs: 50 })))
  if (c.settleMs !== undefined) await sleep(c.settleMs)
  if (c.firstGraceSeconds !== undefined) {
    await Promise.all(ids.map((id) => api(stack).post(`/v1/instances/${id}/stop`, { graceSeconds: c.firstGraceSeconds })))
    await sleep(DISTURB_AFTER_MS)
  }

  const requested = new Map<string, number>()
  await Promise.all(ids.map(async (id) => {
    requested.set(id, Date.now())
    await api(stack).post(`/v1/instances/${id}/stop`, { graceSeconds: grace })
  }))
  const disturbed = c.disturb === undefined ? null : sleep(DISTURB_AFTER_MS).then(async () => { await c.disturb!(stack, ids, grace) })
  const overshoots = await Promise.all(ids.map(async (id) => {
    await waitFor(`${id} stopped`, async () => (await instance(id)).state === 'stopped' ? true : null, { timeoutMs: 120_000, intervalMs: POLL_MS })
    return Date.now() - requested.get(id)! - grace * 1000
  }))
  await disturbed
  if (c.disturb !== undefined) await stack.waitForReady()
  await Promise.all(ids.map((id) => api(stack).delete(`/v1/instances/${id}?graceSeconds=0`)))
  return overshoots
}

function printTable (results: Record<string, Record<string, { p50Ms: number, p99Ms: number }>>): void {
  console.log(`\nstop overshoot beyond the grace period, ms (p50 / p99 over ${RUNS} stops each)`)
  console.log(`${'case'.padEnd(36)} ${GRACES.map((g) => `grace ${g} s`.padStart(16)).join('')}`)
  for (const [name, byGrace] of Object.entries(results)) {
    const cells = GRACES.map((g) => `${byGrace[`grace${g}s`].p50Ms} / ${byGrace[`grace${g}s`].p99Ms}`.padStart(16))
    console.log(`${name.padEnd(36)} ${cells.join('')}`)
  }
}
