/**
 * `npm test`, which CI runs through .ci/run: install and build what is missing or stale, make
 * sure the tools the tests use are there (the Temporal CLIs, the host agent's qemu-img, dosfstools,
 * mtools and iproute2, the stacks' nftables, HAProxy for the API replicas' stack, libfaketime for
 * the agents whose clock is skewed, Docker Compose, Temporal's server, schema tool and UI server
 * for the cluster shape's test, Chromium: building or installing them the first time takes
 * minutes, better spent here than inside a test's timeout), lint, then run the compiled tests
 * with Node's test runner, folder by folder: unit first, then any other folder, then host-agent,
 * stack, integration and the fault matrix. The fast layer's folders (`SIDE_BY_SIDE`: no stack, no host's network, no
 * fixed port or directory; each file's PostgreSQL and Temporal dev server take free ports and
 * temporary directories of their own) run two files at a time; every other folder one file at a
 * time. Every folder runs even when an earlier one failed; the exit status is non-zero if
 * anything did. Reports and the stacks' logs go to test-output/.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { delimiter, dirname, join } from 'node:path'
import { REPO_ROOT, ensureBuilt, ensureInstalled, run } from './tools/bootstrap.mjs'

const COMPILED_TESTS = join(REPO_ROOT, 'dist', 'test')
const OUTPUT = join(REPO_ROOT, 'test-output')
const FIRST = ['unit']
const LAST = ['host-agent', 'stack', 'integration', 'faults']
/** Folders whose files may run two at a time: what each starts is its own (see above). */
const SIDE_BY_SIDE = ['unit', 'activities', 'api', 'db', 'workflows', 'replay']

const suiteStartedAt = Date.now()
ensureInstalled()
ensureBuilt()
rmSync(OUTPUT, { recursive: true, force: true })
mkdirSync(OUTPUT, { recursive: true })

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
for (const [tool, ensure] of [
  ['the host tools', ensureHostTools],
  ['HAProxy', ensureHaproxy],
  ['libfaketime', ensureLibfaketime],
  ['Docker Compose', ensureCompose],
  ["Temporal's server", ensureTemporalServer],
  ['Chromium', ensureChromium]
]) {
  await ensure({ log: console.log }).catch((error) => {
    console.error(`${tool} is not available: ${error.message}`)
    failures.push(`setup (${tool})`)
  })
}
if (run('npm', ['run', 'lint']) !== 0) failures.push('lint')

const totals = { passed: 0, failed: 0, skipped: 0 }
const timings = []
for (const folder of testFolders()) {
  const files = testFiles(folder)
  if (files.length === 0) continue
  const concurrency = SIDE_BY_SIDE.includes(folder) ? 2 : 1
  console.log(`\n# ${folder}: ${files.length} test file(s), ${concurrency} at a time`)
  const tap = join(OUTPUT, `${folder}.tap`)
  const startedAt = Date.now()
  const status = run(process.execPath, [
    '--test', `--test-concurrency=${concurrency}`,
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    '--test-reporter=tap', `--test-reporter-destination=${tap}`,
    ...files
  ], testEnv)
  const counts = countResults(tap)
  totals.passed += counts.passed
  totals.failed += counts.failed
  totals.skipped += counts.skipped
  if (status !== 0) failures.push(folder)
  timings.push(`${folder} ${formatDuration(Date.now() - startedAt)}`)
}
console.log(`\ntime by folder: ${timings.join(', ')}; in all ${formatDuration(Date.now() - suiteStartedAt)}`)

if (failures.length > 0) console.log(`\nfailed: ${failures.join(', ')}`)
// The summary comes last, alone on its line, where CI reads it.
console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
process.exit(failures.length > 0 ? 1 : 0)

/** The folders of dist/test that hold tests, in the order they run. */
function testFolders () {
  if (!existsSync(COMPILED_TESTS)) return []
  const present = readdirSync(COMPILED_TESTS, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== 'helpers')
    .map((entry) => entry.name)
  const middle = present.filter((name) => !FIRST.includes(name) && !LAST.includes(name)).sort()
  return [...FIRST, ...middle, ...LAST].filter((name) => present.includes(name))
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
