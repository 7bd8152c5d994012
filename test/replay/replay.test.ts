/**
 * Every recorded history (test/replay/histories, made by scripts/record-histories.ts) must
 * replay on today's workflow code without a determinism error: a workflow already running in
 * production continues on a new worker exactly as it began. A change to a workflow's shape goes
 * behind `patched()`; this test is what catches one that does not.
 *
 * (protobufjs is a direct dependency of vmplane only so that npm installs one copy for every
 * @temporalio package: with a copy each, the SDK's history parser fails with "type must be a Type".)
 */
import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { Worker } from '@temporalio/worker'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { WORKFLOW_BUNDLE_PATH } from '../../worker/workflow-bundle.js'

const HISTORIES = join(REPO_ROOT, 'test', 'replay', 'histories')

describe('replay of recorded histories', async () => {
  const files = (await readdir(HISTORIES)).filter((name) => name.endsWith('.json')).sort()

  it('has histories of every workflow type', () => {
    const types = new Set(files.map((name) => name.slice(0, name.indexOf('-'))))
    for (const type of ['createInstance', 'startInstance', 'stopInstance', 'rebootInstance', 'deleteInstance', 'applyVmmReports', 'monitorHost', 'reconcile']) {
      assert.ok(types.has(type), `no recorded history of ${type}`)
    }
  })

  it('replays every one of them on the current workflow bundle', async () => {
    const histories = await Promise.all(files.map(async (name) => ({
      workflowId: name,
      history: JSON.parse(await readFile(join(HISTORIES, name), 'utf8'))
    })))
    const failures: string[] = []
    for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }, histories)) {
      if (result.error !== undefined) failures.push(`${result.workflowId}: ${result.error.message}`)
    }
    assert.deepEqual(failures, [])
  })
})
