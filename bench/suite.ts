/**
 * `npm run bench [-- --quick | --smoke] [--scale 100,1000,4000] [--temporal dev|cluster] [--running <data-dir>] [--out <dir>]`:
 * vmplane's performance beside Temporal's own floor, on one stack: the dev server's, or the
 * cluster shape (Temporal's own server on PostgreSQL, two API replicas behind HAProxy, two
 * workers), the floor on the same Temporal.
 *
 * 1. Floor: a no-op workflow with the timers, activity round trips and signals of vmplane's
 *    create-and-start, counted in the history of a real one (floor/), on a worker process with
 *    vmplane's worker tuning, driven at the same concurrencies.
 * 2. vmplane: create-and-start to `running` (the simulator boots in 0 ms), stop to `stopped`,
 *    delete to `destroyed`, each one HTTP request held by `?wait=`: latency one at a time, and
 *    throughput with 10, 50 and 100 in flight over 1,000 instances (with --quick, 40, 100 and
 *    100) on 4 hosts.
 * 3. Ratios of the two.
 * 4. Scale: create-and-start throughput and p99 with 50 in flight for 100 and 1,000 instances
 *    (`--scale` names the points: 4,000 too, or 100 alone), each run from an empty stack. The
 *    throughput round with 50 in flight is that very experiment for its size (1,000 instances,
 *    100 with --quick), so it serves as that point; the others are run on their own. The host
 *    agent's memory at 200 VMMs needs the 1,000-instance point.
 * 5. API reads with 10,000 instances in PostgreSQL (api-reads.ts).
 * 6. Peak memory of the worker, the API, a host agent up to 200 VMMs and a simulator (memory.ts).
 *
 * Prints a table, writes <out>/<time>.json (bench/results by default) and <out>/<time>.svg, and
 * exits non-zero if any operation failed: a figure with failures in it would flatter.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { replicasOf } from '../stack/stack-file.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import { ensureTemporalTools } from '../scripts/tools/temporal-tools.js'
import { measureApiReads } from './api-reads.js'
import { benchStack } from './bench-stack.js'
import { drawChart } from './chart.js'
import { Floor } from './floor/floor.js'
import { cpuPerOperation } from './cpu.js'
import { historyLength } from './floor/history.js'
import { runLoad, type LoadFigures } from './load.js'
import { describeMachine } from './machine.js'
import { MemoryWatch } from './memory.js'
import { round } from './stats.js'
import { vmplaneOperations } from './vmplane-operations.js'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
    scale: { type: 'string', default: '100,1000' },
    running: { type: 'string' },
    temporal: { type: 'string', default: 'dev' },
    out: { type: 'string', default: join(REPO_ROOT, 'bench', 'results') }
  }
})
const SCALE_POINTS = [100, 1000, 4000]
const scalePoints = values.scale.split(',').map(Number)
if (scalePoints.some((n) => !SCALE_POINTS.includes(n))) {
  console.error(`--scale: a comma-separated list of ${SCALE_POINTS.join(', ')}, not ${values.scale}`)
  process.exit(2)
}
if (values.temporal !== 'dev' && values.temporal !== 'cluster') {
  console.error(`--temporal: dev or cluster, not ${values.temporal}`)
  process.exit(2)
}
const SHAPE: 'dev' | 'cluster' = values.temporal
/**
 * What each mode runs: `full` the README's figures; `quick` a look in 3 minutes; `smoke` every
 * figure from few operations, for the suite's test that the benchmark still gives each one (its
 * figures compare with nothing). 50 in flight makes 100 instances at least: the 100-instance
 * scale point.
 */
const SIZES = {
  full: { latencyRuns: 100, instances: { c10: 1000, c50: 1000, c100: 1000 }, listRounds: 5, gets: 1000, historySamples: 10, listRows: 10_000 },
  quick: { latencyRuns: 10, instances: { c10: 40, c50: 100, c100: 100 }, listRounds: 1, gets: 100, historySamples: 10, listRows: 10_000 },
  smoke: { latencyRuns: 3, instances: { c10: 20, c50: 100, c100: 20 }, listRounds: 1, gets: 10, historySamples: 3, listRows: 1_000 }
}
const MODE = values.smoke ? 'smoke' : values.quick ? 'quick' : 'full'
const SIZE = SIZES[MODE]
const OWN_STACK = values.running === undefined
const THROUGHPUT_CONCURRENCIES = [10, 50, 100]
const SCALE_CONCURRENCY = 50
const CLEANUP_CONCURRENCY = 100
const WARMUP_RUNS = 2
const STACK_ENV = {
  // Room for every instance of the largest run, and no rate limit on the load.
  VMPLANE_HOST_VCPUS: '100000',
  VMPLANE_HOST_MEMORY_MIB: '100000000',
  VMPLANE_API_RATE_LIMIT: '100000000'
}

const log = (line: string): void => { console.log(`${new Date().toISOString()} ${line}`) }
const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log })
log(OWN_STACK ? 'starting a stack with 4 hosts' : `using the stack in ${values.running}`)
const stack = await benchStack({ running: values.running, hosts: 4, temporal: SHAPE, env: STACK_ENV })
const { info } = stack
const floor = await Floor.start({ address: info.temporalAddress, namespace: info.namespace })
const ops = vmplaneOperations(info)
const runTag = Date.now().toString(36)
let serial = 0
const names = (n: number): string[] => Array.from({ length: n }, () => `bench-${runTag}-${serial++}`)
let failures = 0

/** Creates and starts `n` instances, `concurrency` at a time; returns the figures and the instances that run. */
async function startInstances (n: number, concurrency: number): Promise<{ figures: LoadFigures, ids: string[] }> {
  const ids: string[] = []
  const figures = await runLoad(names(n), concurrency, async (name) => { ids.push((await ops.createAndStart(name)).instanceId) })
  return { figures, ids }
}

/** Creates and starts, stops, then deletes `n` instances, `concurrency` at a time, each step timed. */
async function vmplaneRound (n: number, concurrency: number): Promise<{ start: LoadFigures, stop: LoadFigures, delete: LoadFigures }> {
  const { figures: start, ids } = await startInstances(n, concurrency)
  return { start, ...await stopAndDelete(ids, concurrency) }
}

async function stopAndDelete (ids: string[], concurrency: number): Promise<{ stop: LoadFigures, delete: LoadFigures }> {
  const stop = await runLoad([...ids], concurrency, ops.stop)
  const remove = await runLoad([...ids], concurrency, ops.remove)
  for (const figures of [stop, remove]) report(figures)
  return { stop, delete: remove }
}

/**
 * The processes whose CPU a create-and-start costs, by component (the agents' VMMs with them):
 * every API and worker replica, and HAProxy in front of several APIs.
 */
async function vmplaneComponents (): Promise<Record<string, number>> {
  const workers = replicasOf(info, 'worker')
  const apis = replicasOf(info, 'api')
  const components = ['temporal', 'postgres', ...workers, ...apis, ...apis.length > 1 ? ['haproxy'] : [], ...info.hosts.map((host) => `agent-${host.id}`)]
  return Object.fromEntries(await Promise.all(components.map(async (name) => [name, await stack.pid(name)] as const)))
}

/** A component's column: the host agents summed as `agents`, each replica with its first (`worker-2` as `worker`). */
function columnOf (component: string): string {
  return component.startsWith('agent-') ? 'agents' : component.replace(/-\d+$/, '')
}

/** CPU ms per operation by column, and their total. */
function byComponent (cpu: Record<string, number>): Record<string, number> {
  const columns: Record<string, number> = {}
  for (const [name, ms] of Object.entries(cpu)) columns[columnOf(name)] = (columns[columnOf(name)] ?? 0) + ms
  const all = Object.fromEntries(Object.entries(columns).map(([name, ms]) => [name, Math.round(ms * 10) / 10]))
  return { ...all, total: Math.round(Object.values(columns).reduce((a, b) => a + b, 0) * 10) / 10 }
}

function report (figures: LoadFigures): LoadFigures {
  failures += figures.failures
  if (figures.failures > 0) log(`  ${figures.failures} failed, e.g. ${figures.failureSamples.join('; ')}`)
  return figures
}

const memoryWatch = new MemoryWatch({ worker: await stack.pid('worker'), api: await stack.pid('api') }, await stack.pid(`agent-${info.hosts[0].id}`))
await memoryWatch.start()
try {
  log(`warming up; counting the history events of ${SIZE.historySamples} creates-and-starts, one at a time`)
  const lengths: number[] = []
  for (const name of names(SIZE.historySamples)) {
    const warm = await ops.createAndStart(name)
    lengths.push(await historyLength(floor.client, warm.operation))
    await ops.stop(warm.instanceId)
    await ops.remove(warm.instanceId)
  }
  await runLoad(Array.from({ length: WARMUP_RUNS }), 1, async () => { await floor.operate() })
  // Where a report falls between workflow tasks varies, so the count does too: the mean and range.
  const historyEvents = {
    vmplaneCreate: round(lengths.reduce((sum, n) => sum + n, 0) / lengths.length),
    vmplaneCreateRange: [Math.min(...lengths), Math.max(...lengths)],
    floor: await historyLength(floor.client, await floor.operate())
  }
  log(`  history events: a create-and-start ${historyEvents.vmplaneCreate} (${lengths.join(', ')}), the floor ${historyEvents.floor}`)
  await vmplaneRound(WARMUP_RUNS, 1)

  const floorByConcurrency: Record<string, LoadFigures> = {}
  const vmplaneByConcurrency: Record<string, { start: LoadFigures, stop: LoadFigures, delete: LoadFigures }> = {}
  const cpuMsPerCreate: Record<string, { floor: Record<string, number>, vmplane: Record<string, number> }> = {}
  for (const concurrency of [1, ...THROUGHPUT_CONCURRENCIES]) {
    const n = concurrency === 1 ? SIZE.latencyRuns : SIZE.instances[`c${concurrency}` as keyof typeof SIZE.instances]
    log(`concurrency ${concurrency}: ${n} floor operations`)
    const floorLoad = async (): Promise<LoadFigures> => await runLoad(Array.from({ length: n }), concurrency, async () => { await floor.operate() })
    let floorFigures: LoadFigures | null = null
    const floorCpu = await cpuPerOperation({ temporal: await stack.pid('temporal'), worker: floor.pid }, n, async () => { floorFigures = await floorLoad() })
    floorByConcurrency[`c${concurrency}`] = report(floorFigures!)
    log(`concurrency ${concurrency}: ${n} instances created and started, stopped, deleted`)
    let started: { figures: LoadFigures, ids: string[] } | null = null
    const vmplaneCpu = await cpuPerOperation(await vmplaneComponents(), n, async () => { started = await startInstances(n, concurrency) })
    const { figures: start, ids } = started!
    vmplaneByConcurrency[`c${concurrency}`] = { start: report(start), ...await stopAndDelete(ids, concurrency) }
    cpuMsPerCreate[`c${concurrency}`] = { floor: byComponent(floorCpu), vmplane: byComponent(vmplaneCpu) }
  }

  log(`API reads with ${SIZE.listRows} instances in PostgreSQL`)
  const reads = await measureApiReads(info, { rows: SIZE.listRows, listRounds: SIZE.listRounds, gets: SIZE.gets })

  const scale: Record<string, LoadFigures | null> = { n100: null, n1000: null, n4000: null, [`n${SIZE.instances.c50}`]: vmplaneByConcurrency[`c${SCALE_CONCURRENCY}`].start }
  const scaleRuns = scalePoints.filter((n) => n !== SIZE.instances.c50)
  for (const n of scaleRuns) {
    log(`scale: ${n} instances created and started, ${SCALE_CONCURRENCY} in flight`)
    const { figures, ids } = await startInstances(n, SCALE_CONCURRENCY)
    scale[`n${n}`] = report(figures)
    // The last run's instances go with a stack of the benchmark's own; one it was lent is left as found.
    if (n === scaleRuns[scaleRuns.length - 1] && OWN_STACK) continue
    log(`  deleting them (${CLEANUP_CONCURRENCY} in flight)`)
    report(await runLoad(ids, CLEANUP_CONCURRENCY, ops.remove))
  }
  const memory = await memoryWatch.stop()

  const c1 = vmplaneByConcurrency.c1
  const throughput = Object.fromEntries(THROUGHPUT_CONCURRENCIES.map((c) => {
    const v = vmplaneByConcurrency[`c${c}`]
    return [`c${c}`, {
      floorPerS: floorByConcurrency[`c${c}`].perS,
      vmplanePerS: v.start.perS,
      vmplaneStopPerS: v.stop.perS,
      vmplaneDeletePerS: v.delete.perS,
      vmplaneP99Ms: v.start.p99Ms,
      floorP99Ms: floorByConcurrency[`c${c}`].p99Ms
    }]
  }))
  const results = {
    date: new Date().toISOString(),
    mode: MODE,
    temporal: SHAPE,
    machine: describeMachine(temporal),
    historyEvents,
    cpuMsPerCreate,
    floor: { start: pick(floorByConcurrency.c1), byConcurrency: floorByConcurrency },
    vmplane: { start: pick(c1.start), stop: pick(c1.stop), delete: pick(c1.delete), byConcurrency: vmplaneByConcurrency },
    ratio: {
      startP50: ratio(c1.start.p50Ms, floorByConcurrency.c1.p50Ms),
      startP99: ratio(c1.start.p99Ms, floorByConcurrency.c1.p99Ms),
      ...Object.fromEntries(THROUGHPUT_CONCURRENCIES.map((c) => [`throughputC${c}`, ratio(throughput[`c${c}`].vmplanePerS, throughput[`c${c}`].floorPerS)]))
    },
    throughput,
    scale: Object.fromEntries(Object.entries(scale).map(([key, f]) => [key, f === null ? null : { perS: f.perS, p50Ms: f.p50Ms, p99Ms: f.p99Ms }])),
    list: { rows: reads.rows, ...reads.list },
    get: reads.get,
    memory,
    failures
  }
  printTable(results)
  const stamp = results.date.replace(/[:.]/g, '-')
  const out = resolve(values.out)
  await mkdir(out, { recursive: true })
  await writeFile(join(out, `${stamp}.json`), JSON.stringify(results, null, 2) + '\n')
  await writeFile(join(out, `${stamp}.svg`), await drawChart([1, ...THROUGHPUT_CONCURRENCIES].flatMap((c) => [
    { system: 'vmplane' as const, concurrency: c, ...pick(vmplaneByConcurrency[`c${c}`].start), perS: vmplaneByConcurrency[`c${c}`].start.perS },
    { system: 'floor' as const, concurrency: c, ...pick(floorByConcurrency[`c${c}`]), perS: floorByConcurrency[`c${c}`].perS }
  ]), `vmplane beside the floor, ${results.mode} run, ${results.date.slice(0, 10)}`))
  log(`wrote ${join(out, `${stamp}.json`)} and .svg`)
} finally {
  await floor.stop()
  await stack.stop()
}
if (failures > 0) {
  console.error(`${failures} operation(s) failed: the figures above count only those that succeeded`)
  process.exit(1)
}

function pick (f: LoadFigures): { p50Ms: number, p99Ms: number } {
  return { p50Ms: f.p50Ms, p99Ms: f.p99Ms }
}

function ratio (a: number, b: number): number {
  return round(a / b, 2)
}

function printTable (r: any): void {
  const row = (label: string, ...cells: Array<string | number | null>): void => {
    console.log(`${label.padEnd(34)}${cells.map((c) => String(c ?? '—').padStart(14)).join('')}`)
  }
  console.log(`\nvmplane beside the floor (${r.mode} run; ${r.machine.cores} cores, ${r.machine.memoryGiB} GiB, Node ${r.machine.node})`)
  console.log('floor: a workflow start, one activity round trip, one signal, completion; no vmplane logic')
  console.log(`history events: a vmplane create-and-start ${r.historyEvents.vmplaneCreate} on average (${r.historyEvents.vmplaneCreateRange.join(' to ')}), the floor ${r.historyEvents.floor}\n`)
  row('concurrency 1 (ms)', 'floor p50', 'floor p99', 'vmplane p50', 'vmplane p99', 'ratio p50')
  row('  create and start to running', r.floor.start.p50Ms, r.floor.start.p99Ms, r.vmplane.start.p50Ms, r.vmplane.start.p99Ms, r.ratio.startP50)
  row('  stop to stopped', null, null, r.vmplane.stop.p50Ms, r.vmplane.stop.p99Ms, null)
  row('  delete to destroyed', null, null, r.vmplane.delete.p50Ms, r.vmplane.delete.p99Ms, null)
  console.log('')
  row('throughput (per second)', 'floor', 'vmplane start', 'ratio', 'stop', 'delete')
  for (const c of THROUGHPUT_CONCURRENCIES) {
    const t = r.throughput[`c${c}`]
    row(`  ${c} in flight`, t.floorPerS, t.vmplanePerS, r.ratio[`throughputC${c}`], t.vmplaneStopPerS, t.vmplaneDeletePerS)
  }
  console.log('')
  row('CPU ms per create (50 in flight)', 'temporal', 'worker', 'api', 'haproxy', 'postgres', 'agents', 'total')
  const cpu = r.cpuMsPerCreate.c50
  row('  floor', cpu.floor.temporal, cpu.floor.worker, null, null, null, null, cpu.floor.total)
  row('  vmplane', cpu.vmplane.temporal, cpu.vmplane.worker, cpu.vmplane.api, cpu.vmplane.haproxy ?? null, cpu.vmplane.postgres, cpu.vmplane.agents, cpu.vmplane.total)
  console.log('')
  row(`scale (${SCALE_CONCURRENCY} in flight)`, 'starts/s', 'p50 ms', 'p99 ms')
  for (const [key, s] of Object.entries<any>(r.scale)) row(`  ${key.slice(1)} instances`, s?.perS ?? null, s?.p50Ms ?? null, s?.p99Ms ?? null)
  console.log('')
  row(`API reads, ${r.list.rows} instances (ms)`, 'p50', 'p99')
  row('  GET /v1/instances?limit=100', r.list.p50Ms, r.list.p99Ms)
  row('  GET /v1/instances/:id', r.get.p50Ms, r.get.p99Ms)
  console.log('')
  row('peak RSS (MB)', 'worker', 'API', 'agent@200', 'per 100 VMMs', 'simulator')
  row('', r.memory.workerMB, r.memory.apiMB, r.memory.agentPer200VmmsMB, r.memory.agentPer100VmmsMB, r.memory.simulatorMB)
}
