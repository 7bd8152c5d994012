/**
 * `npm test`, which CI runs through .ci/run: install and build what is missing or stale, make
 * sure the tools the tests use are there (the Temporal CLIs, the host agent's qemu-img, dosfstools,
 * mtools and iproute2, the stacks' nftables, HAProxy for the API replicas' stack, libfaketime for
 * the agents whose clock is skewed, Docker Compose, Temporal's server, schema tool and UI server
 * for the cluster shape's test, Chromium: building or installing them the first time takes
 * minutes, better spent here than inside a test's timeout), lint, then run the compiled tests
 * with Node's test runner (through scripts/test-runner/run-test-files.mjs, which keeps the order
 * given and counts the CPU each file took with all it started, printed at the end):
 *
 * 1. the fast layer (`FAST`: unit tests, workflow tests on the SDK's test environment, API tests
 *    with `inject`, activities on a PostgreSQL of their own; no stack, no host network, no fixed
 *    port or directory), six files at a time, the workflow tests (the longest) first: they wait
 *    on timers and on their servers more than they compute (here, four at a time kept the cores
 *    65 % busy and took 114 s; six, 94 s; eight ran the long-histories test past its 3 minutes);
 * 2. the tests of real processes (stacks, agents, simulators: every other folder), three files
 *    at a time, by folder and name: each stack takes free ports, a data directory and network
 *    namespaces named after it, so two never meet. Three at a time keep both cores busy (97 % in
 *    `vmstat`; two left more idle, and the suite took 1 min 31 s longer), so their order matters
 *    little: the costliest first, the phase took 15 min 55 s (2026-11-28, run 64), within what it
 *    took in name order on this machine, whose speed moves between runs (13 min 39 s to 16 min
 *    24 s, runs 59 to 65).
 *    Running the timed tests beside them, the others in a CPU control group marked idle, starved
 *    those: a worker that waits seconds for the CPU misses its 3 s workflow task timeout again and
 *    again, and an operation took longer than its test's 20 s;
 * 3. those that assert times or need the CPU to themselves (`ALONE`: a double-run window, a
 *    kill's lateness, a calibrated busy loop, a dead stack's leftovers), one at a time. They leave
 *    some 45 % of the two cores idle, but the fast layer beside them in a CPU control group of a
 *    sixteenth of the usual share starved too (run 64): a stop's grace period ran out before its
 *    power button was pressed, the long-histories test ran past its 3 minutes, and the guest
 *    sampler's unit test saw no read in a second.
 *
 * The benchmark's smoke test checks that every figure comes out, not what it is: it runs with the
 * real-process tests (the README's figures come from `npm run bench` on an idle machine).
 *
 * Every phase runs even when an earlier one failed; the exit status is non-zero if anything did.
 * Reports and the stacks' logs go to test-output/; the time each phase took is printed.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { delimiter, dirname, join, relative } from 'node:path'
import { REPO_ROOT, ensureBuilt, ensureInstalled, run } from './tools/bootstrap.mjs'

const COMPILED_TESTS = join(REPO_ROOT, 'dist', 'test')
const OUTPUT = join(REPO_ROOT, 'test-output')
const RUN_TEST_FILES = join(REPO_ROOT, 'scripts', 'test-runner', 'run-test-files.mjs')
/** How many of the costliest test files the summary names. */
const COSTLIEST_SHOWN = 12
/** The fast layer's folders. */
const FAST = ['workflows', 'unit', 'activities', 'api', 'db', 'replay']
/** Tests whose assertions or figures are times or CPU, with the machine to themselves. */
const ALONE = [
  'faults/frozen-activation', 'faults/one-guest', 'faults/migration-storm',
  'faults/drain-under-fire', 'integration/unknown-is-not-dead',
  // Kills a stack and counts what it left before another starts and reaps it.
  'stack/leftover-networks'
]

const suiteStartedAt = Date.now()
ensureInstalled()
ensureBuilt()
rmSync(OUTPUT, { recursive: true, force: true })
mkdirSync(OUTPUT, { recursive: true })

// Lint runs beside the tools' builds and installs (each mostly one busy core, or waiting on the
// disk), its output held and printed where it used to run: here, some 30 s sooner done.
const linting = runHeld('npm', ['run', 'lint'])
const { ensureTemporalServer, ensureTemporalTools } = await import('../dist/scripts/tools/temporal-tools.js')
const tools = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
// Every test finds the same `temporal` and `tctl`, by TEMPORAL_CLI (the dev stack's setting) or on PATH.
const toolDirs = [tools.temporal, tools.tctl].filter((tool) => tool !== null).map((tool) => dirname(tool))
const testEnv = {
  ...process.env,
  TEMPORAL_CLI: tools.temporal,
  PATH: [...toolDirs, process.env.PATH].join(delimiter)
}

const failures = []
// The tests that need these find them again (findCompose, findChromium, findLibfaketime, the dev
// stack's HAProxy; the cluster shape's stack builds its server) and fail saying what is missing;
// the other tests still run.
const { ensureCompose } = await import('../dist/scripts/tools/compose.js')
const { ensureChromium } = await import('../dist/scripts/tools/chromium.js')
const { ensureHostTools } = await import('../dist/stack/host-tools.js')
const { ensureHaproxy } = await import('../dist/scripts/tools/haproxy.js')
const { ensureLibfaketime } = await import('../dist/scripts/tools/faketime.js')
// Two at a time: those Debian installs (apt takes one at a time), and those Go builds.
const ensureInTurn = async (tools) => {
  for (const [tool, ensure] of tools) {
    await ensure({ log: console.log }).catch((error) => {
      console.error(`${tool} is not available: ${error.message}`)
      failures.push(`setup (${tool})`)
    })
  }
}
await Promise.all([
  ensureInTurn([['the host tools', ensureHostTools], ['HAProxy', ensureHaproxy], ['libfaketime', ensureLibfaketime], ['Chromium', ensureChromium]]),
  ensureInTurn([['Docker Compose', ensureCompose], ["Temporal's server", ensureTemporalServer]])
])
const lint = await linting
process.stdout.write(lint.output)
if (lint.status !== 0) failures.push('lint')

const totals = { passed: 0, failed: 0, skipped: 0 }
const timings = []
const folders = testFolders()
const isAlone = (file) => ALONE.some((name) => file.endsWith(`/${name}.test.js`))
const realProcesses = folders.filter((f) => !FAST.includes(f)).sort().flatMap((folder) => testFiles(folder))
const phases = [
  { name: 'fast layer', concurrency: 6, files: FAST.filter((f) => folders.includes(f)).flatMap((folder) => testFiles(folder)) },
  { name: 'real processes', concurrency: 3, files: realProcesses.filter((file) => !isAlone(file)) },
  { name: 'real processes, alone', concurrency: 1, files: realProcesses.filter(isAlone) }
]
for (const phase of phases) {
  if (phase.files.length === 0) continue
  console.log(`\n# ${phase.name}: ${phase.files.length} test file(s), ${phase.concurrency} at a time`)
  const startedAt = Date.now()
  const status = run(process.execPath, [RUN_TEST_FILES, String(phase.concurrency), tapFile(phase), cpuFile(phase), ...phase.files], testEnv)
  const counts = countResults(tapFile(phase))
  totals.passed += counts.passed
  totals.failed += counts.failed
  totals.skipped += counts.skipped
  if (status !== 0) failures.push(phase.name)
  timings.push(`${phase.name} ${formatDuration(Date.now() - startedAt)}`)
}
console.log(`\ntime by phase: ${timings.join(', ')}; in all ${formatDuration(Date.now() - suiteStartedAt)}`)
printCpuByFile(phases)

if (failures.length > 0) console.log(`\nfailed: ${failures.join(', ')}`)
// The summary comes last, alone on its line, where CI reads it.
console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
process.exit(failures.length > 0 ? 1 : 0)

/** Runs a command in the repository, its output (stdout and stderr, interleaved) held until it ends. */
function runHeld (command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk) => { output += chunk })
    child.once('error', reject)
    child.once('close', (status) => { resolve({ status: status ?? 1, output }) })
  })
}

function cpuFile (phase) {
  return join(OUTPUT, `${slug(phase)}.cpu.json`)
}

function tapFile (phase) {
  return join(OUTPUT, `${slug(phase)}.tap`)
}

function slug (phase) {
  return phase.name.replaceAll(/[^a-z]+/g, '-')
}

/** The CPU the test files took (each with all it started), in all and the costliest by name, where it was counted. */
function printCpuByFile (phases) {
  const seconds = phases.flatMap((phase) => existsSync(cpuFile(phase)) ? Object.entries(JSON.parse(readFileSync(cpuFile(phase), 'utf8'))) : [])
    .filter(([, cpu]) => cpu !== null)
    .sort(([, a], [, b]) => b - a)
  if (seconds.length === 0) return
  const total = seconds.reduce((sum, [, cpu]) => sum + cpu, 0)
  const costliest = seconds.slice(0, COSTLIEST_SHOWN).map(([file, cpu]) => `${relative(COMPILED_TESTS, file).replace(/\.test\.js$/, '')} ${Math.round(cpu)} s`)
  console.log(`\nCPU of the test files, each with what it started: ${Math.round(total)} s in all; the costliest: ${costliest.join(', ')}`)
}

/** The folders of dist/test that hold tests. */
function testFolders () {
  if (!existsSync(COMPILED_TESTS)) return []
  return readdirSync(COMPILED_TESTS, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== 'helpers')
    .map((entry) => entry.name)
}

/**
 * The compiled test files of a folder (Node 20's test runner does not expand globs), leaving out
 * any whose TypeScript source is gone: tsc does not delete what it compiled before.
 */
function testFiles (folder) {
  return readdirSync(join(COMPILED_TESTS, folder), { recursive: true })
    .filter((name) => name.endsWith('.test.js'))
    .filter((name) => existsSync(join(REPO_ROOT, 'test', folder, name.replace(/\.js$/, '.ts'))))
    .sort()
    .map((name) => join(COMPILED_TESTS, folder, name))
}

/**
 * The counts of a TAP report: Node's summary for passes and failures; for skips, every `# SKIP`
 * line, since a skipped suite (the driver against a real cloud-hypervisor, where there is none)
 * is not in Node's own `skipped` count.
 */
function countResults (tapFile) {
  const tap = existsSync(tapFile) ? readFileSync(tapFile, 'utf8') : ''
  const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(tap)?.[1] ?? 0)
  return {
    passed: count('pass'),
    failed: count('fail') + count('cancelled'),
    skipped: (tap.match(/^\s*ok \d+ - .* # SKIP/gm) ?? []).length + count('todo')
  }
}

/** "3 min 07 s", or "41 s" */
function formatDuration (ms) {
  const seconds = Math.round(ms / 1000)
  return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`
}
