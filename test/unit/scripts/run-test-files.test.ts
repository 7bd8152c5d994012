/**
 * npm test's file runner (scripts/test-runner/run-test-files.mjs): files start in the order it is
 * given, not sorted by name as `node --test a b` sorts them (which had the fast layer's longest
 * files start last), and a failed test fails the run.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

const RUNNER = join(import.meta.dirname, '..', '..', '..', '..', 'scripts', 'test-runner', 'run-test-files.mjs')

describe('run-test-files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vmplane-run-test-files-'))
  after(() => { rmSync(dir, { recursive: true, force: true }) })

  /** A test file that writes its name to the order file when it starts, and passes or fails. */
  const testFile = (name: string, passes: boolean): string => {
    const file = join(dir, `${name}.test.mjs`)
    writeFileSync(file, [
      "import { appendFileSync } from 'node:fs'",
      "import { it } from 'node:test'",
      `appendFileSync(process.env.ORDER_FILE, '${name}\\n')`,
      `it('${name}', () => { if (!${passes}) throw new Error('${name} fails') })`
    ].join('\n'))
    return file
  }

  const runFiles = (files: string[]) => {
    const orderFile = join(dir, `order-${files.length}-${Date.now()}`)
    writeFileSync(orderFile, '')
    // Without the test context this file runs in: run() within a test file runs nothing.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env
    const result = spawnSync(process.execPath, [RUNNER, '1', join(dir, 'report.tap'), join(dir, 'cpu.json'), ...files], {
      env: { ...env, ORDER_FILE: orderFile },
      encoding: 'utf8',
      timeout: 60_000
    })
    return { status: result.status, order: readFileSync(orderFile, 'utf8').trim().split('\n') }
  }

  it('starts the files in the order given, one at a time here', () => {
    const { status, order } = runFiles(['c', 'b', 'a'].map((name) => testFile(name, true)))
    assert.deepEqual(order, ['c', 'b', 'a'])
    assert.equal(status, 0)
    assert.match(readFileSync(join(dir, 'report.tap'), 'utf8'), /^# pass 3$/m)
  })

  it('exits 1 when a test failed', () => {
    const { status } = runFiles([testFile('passing', true), testFile('failing', false)])
    assert.equal(status, 1)
  })
})
