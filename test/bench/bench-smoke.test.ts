/**
 * `npm run bench -- --smoke --scale 100` on a stack of its own, as a user runs it: it must finish
 * and print every figure the benchmark promises, each from the fewest operations that give it
 * (the quick and full runs make more of the same operations). Only that each figure is there and
 * is a finite number is checked, never its value: speed is what the benchmark reports, not what
 * a test asserts. Its one scale point is 100 instances: the 1,000-instance point (and the host
 * agent's memory at 200 VMMs, which it measures) runs the same code on ten times the instances,
 * for five minutes of the suite, and reads null here as the 4,000-instance point does.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

const SUITE = join(REPO_ROOT, 'dist', 'bench', 'suite.js')
/** The figures the report format names, each a finite number. */
const FIGURES = [
  'floor.start.p50Ms', 'floor.start.p99Ms', 'vmplane.start.p50Ms', 'vmplane.start.p99Ms', 'ratio.startP50',
  'vmplane.stop.p50Ms', 'vmplane.stop.p99Ms', 'vmplane.delete.p50Ms', 'vmplane.delete.p99Ms',
  'throughput.c10.floorPerS', 'throughput.c10.vmplanePerS', 'ratio.throughputC10',
  'throughput.c50.floorPerS', 'throughput.c50.vmplanePerS', 'ratio.throughputC50',
  'throughput.c100.floorPerS', 'throughput.c100.vmplanePerS', 'ratio.throughputC100',
  'scale.n100.perS', 'scale.n100.p99Ms',
  'list.p50Ms', 'list.p99Ms', 'get.p50Ms', 'get.p99Ms',
  'memory.workerMB', 'memory.apiMB', 'memory.simulatorMB',
  'historyEvents.vmplaneCreate', 'historyEvents.floor',
  'cpuMsPerCreate.c50.floor.temporal', 'cpuMsPerCreate.c50.floor.worker', 'cpuMsPerCreate.c50.floor.total',
  'cpuMsPerCreate.c50.vmplane.temporal', 'cpuMsPerCreate.c50.vmplane.worker', 'cpuMsPerCreate.c50.vmplane.api',
  'cpuMsPerCreate.c50.vmplane.postgres', 'cpuMsPerCreate.c50.vmplane.agents', 'cpuMsPerCreate.c50.vmplane.total',
  'machine.cores', 'machine.memoryGiB'
]

function at (object: unknown, path: string): unknown {
  return path.split('.').reduce<any>((value, key) => value?.[key], object)
}

describe('npm run bench -- --smoke', () => {
  let out: string
  let run: { code: number | null, output: string }
  before(async () => {
    out = await mkdtemp(join(tmpdir(), 'vmplane-bench-'))
    const child = spawn(process.execPath, [SUITE, '--smoke', '--scale', '100', '--out', out], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => { output += chunk.toString() })
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    run = { code, output }
  })
  after(async () => { await rm(out, { recursive: true, force: true }) })

  it('finishes with every operation succeeded', () => {
    assert.equal(run.code, 0, run.output.slice(-4000))
  })

  it('writes every figure as a finite number, the scale points not run as null', async () => {
    const files = await readdir(out)
    const json = files.find((name) => name.endsWith('.json'))
    assert.ok(json !== undefined, `no results in ${out}: ${files.join(', ')}`)
    const results = JSON.parse(await readFile(join(out, json), 'utf8'))
    const missing = FIGURES.filter((path) => !Number.isFinite(at(results, path)))
    assert.deepEqual(missing, [], 'figures missing or not finite')
    for (const path of ['scale.n1000', 'scale.n4000', 'memory.agentPer200VmmsMB', 'memory.agentPer100VmmsMB']) assert.equal(at(results, path), null, path)
    assert.equal(typeof results.machine.node, 'string')
    assert.equal(typeof results.machine.temporal, 'string')
  })

  it('draws the chart as SVG and prints the table', async () => {
    const svg = (await readdir(out)).find((name) => name.endsWith('.svg'))
    assert.ok(svg !== undefined)
    assert.match(await readFile(join(out, svg), 'utf8'), /^<svg[\s\S]*<\/svg>$/)
    for (const heading of ['create and start to running', 'throughput (per second)', 'GET /v1/instances?limit=100', 'peak RSS (MB)']) {
      assert.ok(run.output.includes(heading), `the table lacks "${heading}"`)
    }
  })
})
