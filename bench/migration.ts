/**
 * `npm run bench:migration [-- --runs N --instances N]`: live migration's figures (issue 17).
 *
 * - Migration time: from `POST /v1/instances/:id/migrate` to the operation's end, for VMs of 256
 *   MiB, 1 GiB and 4 GiB over a simulated 1 GiB/s link (`sim.migration_mib_per_s=1024`), RUNS
 *   migrations each, one at a time. The downtime is what the source VMM logs (the simulator's
 *   version of Cloud Hypervisor's `Migration completed after … with a downtime of N ms`: from
 *   the source's pause to the target's acknowledgement), and the memory iterations precopy took.
 * - Drain throughput: 3 × INSTANCES running instances spread over 3 hosts, the fullest host
 *   drained 3 at a time; the time from the drain's request to `drained`, and instances moved per
 *   second.
 *
 * Prints a table and writes bench/results/migration-<time>.json.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { api, launchStack, type LaunchedStack } from '../test/helpers/launcher.js'
import { waitFor } from '../stack/wait.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import { ensureTemporalTools } from '../scripts/tools/temporal-tools.js'
import { describeMachine } from './machine.js'
import { percentile, round } from './stats.js'

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, instances: { type: 'string', default: '12' } } })
const RUNS = Number(values.runs)
const DRAINED = Number(values.instances)
const MEMORY_MIB = [256, 1024, 4096]
const LINK = 'sim.migration_mib_per_s=1024'
const DOWNTIME_LINE = /Migration completed after [\d.]+s with a downtime of (\d+)ms/
const ITERATIONS_LINE = /Precopy complete: iter=(\d+)/

interface Instance { id: string, state: string, operation: { id: string } | null, vmm: { id: string, hostId: string } | null }
interface Summary { p50: number, p99: number, max: number }

const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
const stack = await launchStack({
  outputDir: join(REPO_ROOT, 'test-output', 'bench'),
  hosts: 3,
  env: { VMPLANE_API_RATE_LIMIT: '100000000', VMPLANE_HOST_VCPUS: '256', VMPLANE_HOST_MEMORY_MIB: '262144', VMPLANE_STORAGE_GIB: '100000' }
})
let serial = 0
try {
  const migrations: Record<string, { timeMs: Summary, downtimeMs: Summary, iterations: Summary }> = {}
  for (const memoryMiB of MEMORY_MIB) {
    const samples = { timeMs: [] as number[], downtimeMs: [] as number[], iterations: [] as number[] }
    const instance = await running(memoryMiB)
    for (let run = 0; run < RUNS; run++) {
      const measured = await migrateOnce(instance.id)
      samples.timeMs.push(measured.timeMs)
      samples.downtimeMs.push(measured.downtimeMs)
      samples.iterations.push(measured.iterations)
    }
    migrations[`${memoryMiB} MiB`] = { timeMs: summary(samples.timeMs), downtimeMs: summary(samples.downtimeMs), iterations: summary(samples.iterations) }
    console.log(`${memoryMiB} MiB: migration ${JSON.stringify(migrations[`${memoryMiB} MiB`])}`)
  }
  const drain = await drainOnce()
  console.log(`\nlive migration over a simulated 1 GiB/s link, ${RUNS} runs each (p50 / p99 / max)`)
  console.log(`${'memory'.padEnd(10)}${'migration ms'.padStart(26)}${'downtime ms'.padStart(22)}${'iterations'.padStart(16)}`)
  for (const [memory, m] of Object.entries(migrations)) {
    const cell = (s: Summary, width: number): string => `${s.p50} / ${s.p99} / ${s.max}`.padStart(width)
    console.log(`${memory.padEnd(10)}${cell(m.timeMs, 26)}${cell(m.downtimeMs, 22)}${cell(m.iterations, 16)}`)
  }
  console.log(`\ndrain of ${drain.instances} instances, 3 at a time: ${round(drain.seconds)} s, ${round(drain.instances / drain.seconds, 2)} instances/s`)
  const file = join(REPO_ROOT, 'bench', 'results', `migration-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
  await mkdir(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
  await writeFile(file, JSON.stringify({ runs: RUNS, link: LINK, migrations, drain, machine: describeMachine(temporal) }, null, 2) + '\n')
  console.log(`\nwrote ${file}`)
} finally {
  await stack.stop()
}

function summary (samples: number[]): Summary {
  return { p50: round(percentile(samples, 50)), p99: round(percentile(samples, 99)), max: round(Math.max(...samples)) }
}

async function instance (id: string): Promise<Instance> {
  return (await api(stack).get<Instance>(`/v1/instances/${id}`)).body
}

async function running (memoryMiB: number): Promise<Instance> {
  const { body } = await api(stack).post<{ instance: Instance }>('/v1/instances', {
    name: `mig-${serial++}`, vcpus: 1, memoryMiB, boot: { kernel: 'vmlinux', cmdline: `console=ttyS0 ${LINK}` }
  })
  return await waitFor(`${body.instance.id} running`, async () => {
    const i = await instance(body.instance.id)
    return i.state === 'running' && i.operation === null ? i : null
  }, { timeoutMs: 60_000, intervalMs: 50 })
}

/** One migration through the API: its time, and what the source VMM logged of it. */
async function migrateOnce (id: string): Promise<{ timeMs: number, downtimeMs: number, iterations: number }> {
  const source = (await instance(id)).vmm!
  const started = Date.now()
  const { status, body } = await api(stack).post<{ operation: { status: string, error: unknown } }>(`/v1/instances/${id}/migrate?wait=300`)
  const timeMs = Date.now() - started
  if (status !== 200 || body.operation.status !== 'succeeded') throw new Error(`migration of ${id} ended ${status}: ${JSON.stringify(body.operation)}`)
  const log = await readFile(join(hostOf(stack, source.hostId).stateDir, 'vmms', source.id, 'ch.log'), 'utf8')
  const downtime = DOWNTIME_LINE.exec(log)
  const iterations = ITERATIONS_LINE.exec(log)
  if (downtime === null || iterations === null) throw new Error(`the source VMM ${source.id} logged no migration figures`)
  return { timeMs, downtimeMs: Number(downtime[1]), iterations: Number(iterations[1]) }
}

function hostOf (launched: LaunchedStack, hostId: string) {
  const host = launched.info.hosts.find((h) => h.id === hostId)
  if (host === undefined) throw new Error(`no host ${hostId}`)
  return host
}

/** Spreads 3 × INSTANCES running instances over the 3 hosts, then drains the fullest. */
async function drainOnce (): Promise<{ instances: number, seconds: number }> {
  const made = await Promise.all(Array.from({ length: 3 * DRAINED }, async () => await running(256)))
  const perHost = new Map<string, number>()
  for (const i of made) perHost.set(i.vmm!.hostId, (perHost.get(i.vmm!.hostId) ?? 0) + 1)
  const [target] = [...perHost.entries()].sort((a, b) => b[1] - a[1])[0]!
  const started = Date.now()
  const drain = await api(stack).post(`/v1/hosts/${target}/drain`, { concurrency: 3 })
  if (drain.status !== 202) throw new Error(`drain of ${target} answered ${drain.status}: ${JSON.stringify(drain.body)}`)
  const host = await waitFor(`${target} drained`, async () => {
    const { body } = await api(stack).get<{ drain: { status: string, migrated: number } | null }>(`/v1/hosts/${target}`)
    return body.drain?.status === 'drained' ? body : null
  }, { timeoutMs: 600_000, intervalMs: 100 })
  return { instances: host.drain!.migrated, seconds: (Date.now() - started) / 1000 }
}
