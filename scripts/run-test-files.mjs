/**
 * `node scripts/run-test-files.mjs <concurrency> <spec report> <TAP report> <file>…`: runs test
 * files with Node's test runner, `concurrency` at a time, in the order given, so that the longest
 * start first (its command line, `node --test a b`, sorts them by name before it starts any). The
 * spec report goes to the file named, or to stdout for `-`; the exit status is 1 if a test failed.
 * npm test (scripts/test.mjs) runs each of its phases through it.
 */
import { createWriteStream } from 'node:fs'
import { PassThrough } from 'node:stream'
import { finished } from 'node:stream/promises'
import { run } from 'node:test'
import { spec as SpecReporter, tap } from 'node:test/reporters'

const [concurrency, specReport, tapReport, ...files] = process.argv.slice(2)
let failed = 0
const tests = run({ files, concurrency: Number(concurrency) })
tests.on('test:fail', () => { failed++ })
const specStream = tests.pipe(new PassThrough({ objectMode: true })).compose(new SpecReporter())
const tapStream = tests.pipe(new PassThrough({ objectMode: true })).compose(tap)
const toStdout = specReport === '-'
const specOutput = specStream.pipe(toStdout ? process.stdout : createWriteStream(specReport), { end: !toStdout })
// Done once stdout has had all the report, or a file has been written and closed.
await Promise.all([finished(toStdout ? specStream : specOutput), finished(tapStream.pipe(createWriteStream(tapReport)))])
process.exit(failed > 0 ? 1 : 0)
