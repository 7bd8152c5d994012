/**
 * `npm test`, which CI runs through .ci/run: install and build what is missing or stale, make
 * sure the tools the tests use are there (the Temporal CLIs, the host agent's qemu-img, dosfstools,
 * mtools and iproute2, the stacks' nftables, HAProxy for the API replicas' stack, libfaketime for
 * the agents whose clock is skewed, Docker Compose, Temporal's server, schema tool and UI server
 * for the cluster shape's test, Chromium: building or installing them the first time takes
 * minutes, better spent here than inside a test's timeout), lint, then run the compiled tests
 * with Node's test runner (through scripts/run-test-files.mjs, which keeps the order given):
 *
 * 1. the fast layer's workflow tests (on the SDK's test environment), six files at a time: they
 *    wait on timers and on their servers more than they compute;
 * 2. the tests of real processes (stacks, agents, simulators: every folder but the fast layer's),
 *    three files at a time, the longest first: each stack takes free ports, a data directory and
 *    network namespaces named after it, so two never meet. Three at a time keep both cores busy
 *    (97 % in `vmstat`; two left more idle, and the suite took 1 min 31 s longer). Running the
 *    timed tests beside them, the others in a CPU control group marked idle, starved those: a
 *    worker that waits seconds for the CPU misses its 3 s workflow task timeout again and again,
 *    and an operation took longer than its test's 20 s;
 * 3. those that assert times or need the CPU to themselves (`ALONE`: a double-run window, a
 *    kill's lateness, a calibrated busy loop, a dead stack's leftovers), one at a time, which
 *    leave some 45 % of the two cores idle; beside them, the rest of the fast layer (unit tests,
 *    API tests with `inject`, activities on a PostgreSQL of their own, the replay of recorded
 *    histories; no stack, no host network, no fixed port or directory), six files at a time, in a
 *    CPU control group of a sixteenth of the usual share, so that the timed tests have the CPU
 *    whenever they want it (measured 2026-11-28: the timed tests took 488 s so, 485 s alone).
 *    The workflow tests are not among them: starved, a stop's grace period ran out before its
 *    power button was pressed, and the long-histories test ran past its 3 minutes (40 s on its
 *    own). Where no cpu controller can be written, the rest of the fast layer runs on its own
 *    after the workflow tests. `nice` would not do: every stack component, PostgreSQL backend and
 *    VMM starts a session of its own, and the kernel's autogroups weigh each session alike
 *    whatever its niceness. Side by side, each phase writes its report to test-output/, printed
 *    here once both ended.
 *
 * The benchmark's smoke test checks that every figure comes out, not what it is: it runs with the
 * real-process tests (the README's figures come from `npm run bench` on an idle machine).
 *
 * Every phase runs even when an earlier one failed; the exit status is non-zero if anything did.
 * Reports and the stacks' logs go to test-output/; the time each phase took is printed.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs'
import { delimiter, dirname, join, relative } from 'node:path'
import { REPO_ROOT, ensureBuilt, ensureInstalled } from './tools/bootstrap.mjs'

const COMPILED_TESTS = join(REPO_ROOT, 'dist', 'test')
const OUTPUT = join(REPO_ROOT, 'test-output')
const RUN_TEST_FILES = join(REPO_ROOT, 'scripts', 'run-test-files.mjs')
/** The fast layer's folders. */
const FAST = ['workflows', 'unit', 'activities', 'api', 'db', 'replay']
/**
 * The real-process tests that take the most CPU, most first (each in a CPU accounting group of its
 * own, 2026-11-28: the fault matrix 379 s, the live migration's 143, the cluster's crash campaign
 * 130, the benchmark's smoke run 129, the crash campaign 111, the storm 103, the rest 48 or less):
 * started first, they end before the phase's last minutes, where fewer files run than there are
 * slots. The others follow by folder.
 */
const LONGEST = [
  'faults/fault-matrix', 'faults/migration-faults', 'faults/campaign-cluster', 'bench/bench-smoke',
  'faults/campaign', 'faults/storm', 'stack/temporal-cluster', 'docs/runbook', 'cli/cli'
]
/** Tests whose assertions or figures are times or CPU, with the machine to themselves. */
const ALONE = [
  'faults/frozen-activation', 'faults/one-guest', 'faults/migration-storm',
  'faults/drain-under-fire', 'integration/unknown-is-not-dead',
  // Kills a stack and counts what it left before another starts and reaps it.
  'stack/leftover-networks'
]

/** The CPU control group the fast layer but its workflow tests runs in, beside the tests that run alone. */
const LOW_SHARE_GROUP = 'vmplane-fast-layer'

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
const isWorkflowTest = (file) => file.startsWith(join(COMPILED_TESTS, 'workflows') + '/')
/** Where a file comes in the longest first: its place in LONGEST, or after them all (a stable sort keeps the folders' order). */
const longestRank = (file) => {
  const rank = LONGEST.findIndex((name) => file.endsWith(`/${name}.test.js`))
  return rank === -1 ? LONGEST.length : rank
}
const realProcesses = folders.filter((f) => !FAST.includes(f)).sort().flatMap((folder) => testFiles(folder))
  .sort((a, b) => longestRank(a) - longestRank(b))
const fastFiles = FAST.filter((f) => folders.includes(f)).flatMap((folder) => testFiles(folder))
const workflowTests = { name: 'fast layer, workflows', concurrency: 6, files: fastFiles.filter(isWorkflowTest) }
const fastRest = { name: 'fast layer, the rest', concurrency: 6, files: fastFiles.filter((file) => !isWorkflowTest(file)) }
const real = { name: 'real processes', concurrency: 3, files: realProcesses.filter((file) => !isAlone(file)) }
const alone = { name: 'real processes, alone', concurrency: 1, files: realProcesses.filter(isAlone) }
const lowShareGroup = lowShareCpuGroup()
if (lowShareGroup === null) console.log('no CPU control group can be made here: the rest of the fast layer runs on its own')
/** Steps one after the other; the phases of a step side by side. */
const steps = lowShareGroup === null
  ? [[workflowTests], [fastRest], [real], [alone]]
  : [[workflowTests], [real], [alone, { ...fastRest, cpuGroup: lowShareGroup }]]
for (const step of steps) {
  const phases = step.filter((phase) => phase.files.length > 0)
  const reported = phases.length > 1 ? 'file' : 'stdout'
  for (const phase of phases) {
    const group = phase.cpuGroup === undefined ? '' : `, in the low-share CPU group ${phase.cpuGroup}`
    console.log(`\n# ${phase.name}: ${phase.files.length} test file(s), ${phase.concurrency} at a time${group}${reported === 'file' ? `, reported in ${relative(REPO_ROOT, reportFile(phase))}` : ''}`)
  }
  const ended = await Promise.all(phases.map(async (phase) => await runPhase(phase, reported)))
  for (const { phase, status, ms } of ended) {
    if (reported === 'file') {
      console.log(`\n# ${phase.name}: its report`)
      process.stdout.write(readFileSync(reportFile(phase), 'utf8'))
    }
    const counts = countResults(tapFile(phase))
    totals.passed += counts.passed
    totals.failed += counts.failed
    totals.skipped += counts.skipped
    if (status !== 0) failures.push(phase.name)
    timings.push(`${phase.name} ${formatDuration(ms)}`)
  }
}
if (lowShareGroup !== null) removeGroup(lowShareGroup)
console.log(`\ntime by phase: ${timings.join(', ')}; in all ${formatDuration(Date.now() - suiteStartedAt)}`)

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

/** Runs a phase's test files (scripts/run-test-files.mjs), in its CPU group if it has one. */
async function runPhase (phase, reported) {
  const startedAt = Date.now()
  const args = [RUN_TEST_FILES, String(phase.concurrency), reported === 'file' ? reportFile(phase) : '-', tapFile(phase), ...phase.files]
  // The shell moves itself into the group, then becomes the test runner.
  const [command, commandArgs] = phase.cpuGroup === undefined
    ? [process.execPath, args]
    : ['sh', ['-c', 'echo $$ > "$0" && exec "$@"', join(phase.cpuGroup, 'cgroup.procs'), process.execPath, ...args]]
  const child = spawn(command, commandArgs, { cwd: REPO_ROOT, stdio: 'inherit', env: testEnv })
  const [code, signal] = await once(child, 'exit')
  return { phase, status: code ?? (signal === null ? 1 : 128), ms: Date.now() - startedAt }
}

/**
 * A CPU control group whose processes get a sixteenth of the share of a process outside it when
 * both want a core (`cpu.shares` 64 of cgroup v1's 1024, or `cpu.weight` 6 of v2's 100), made
 * under the cpu controller's root; null where none can be.
 */
function lowShareCpuGroup () {
  for (const [root, file, share] of [['/sys/fs/cgroup/cpu', 'cpu.shares', '64'], ['/sys/fs/cgroup', 'cpu.weight', '6']]) {
    if (!existsSync(join(root, 'cgroup.procs'))) continue
    const group = join(root, LOW_SHARE_GROUP)
    try {
      mkdirSync(group, { recursive: true })
      writeFileSync(join(group, file), share)
      return group
    } catch {
      removeGroup(group)
    }
  }
  return null
}

function removeGroup (group) {
  try {
    rmdirSync(group)
  } catch {
    // Gone already, or something still runs in it.
  }
}

function reportFile (phase) {
  return join(OUTPUT, `${slug(phase)}.txt`)
}

function tapFile (phase) {
  return join(OUTPUT, `${slug(phase)}.tap`)
}

function slug (phase) {
  return phase.name.replaceAll(/[^a-z]+/g, '-')
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
