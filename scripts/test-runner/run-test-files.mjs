/**
 * `node scripts/test-runner/run-test-files.mjs <concurrency> <TAP report> <CPU report> <file>…`:
 * runs test files with Node's test runner, `concurrency` at a time, in the order given, so that
 * the longest start first (its command line, `node --test a b`, sorts them by name before it
 * starts any). The spec report goes to stdout, the TAP report to the file named; the CPU report is
 * JSON, the CPU seconds of each file with all it started (join-cpu-group.mjs), `{}` where the
 * machine has no control group to count them in. The exit status is 1 if a test failed. npm test
 * (scripts/test.mjs) runs each of its phases through it.
 */
import { createWriteStream, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { PassThrough } from 'node:stream'
import { finished } from 'node:stream/promises'
import { run } from 'node:test'
import { spec as SpecReporter, tap } from 'node:test/reporters'
import { pathToFileURL } from 'node:url'
import { cpuGroupsRoot, removeGroup, takeCpuSeconds } from './cpu-groups.mjs'

const [concurrency, tapReport, cpuReport, ...given] = process.argv.slice(2)
// As the test runner gives them to the files' processes, which name their groups after them.
const files = given.map((file) => resolve(file))
const groups = cpuGroupsRoot()
if (groups !== null) {
  // The test runner gives its files this process's environment.
  process.env.VMPLANE_TEST_CPU_GROUPS = groups
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(join(import.meta.dirname, 'join-cpu-group.mjs'))}`.trim()
}

let failed = 0
const tests = run({ files, concurrency: Number(concurrency) })
tests.on('test:fail', () => { failed++ })
const specStream = tests.pipe(new PassThrough({ objectMode: true })).compose(new SpecReporter())
const tapStream = tests.pipe(new PassThrough({ objectMode: true })).compose(tap)
specStream.pipe(process.stdout, { end: false })
// Done once stdout has had all the spec report and the TAP file is written and closed.
await Promise.all([finished(specStream), finished(tapStream.pipe(createWriteStream(tapReport)))])

const cpuSeconds = groups === null ? {} : Object.fromEntries(files.map((file) => [file, takeCpuSeconds(groups, file)]))
if (groups !== null) removeGroup(groups)
writeFileSync(cpuReport, JSON.stringify(cpuSeconds, null, 2))
process.exit(failed > 0 ? 1 : 0)
