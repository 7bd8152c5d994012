/**
 * Every recorded history (test/replay/histories, made by test/replay/record-histories.ts) must
 * replay on today's workflow code without a determinism error: a workflow already running in
 * production continues on a new worker exactly as it began. A change to a workflow's shape goes
 * behind `patched()`; this test is what catches one that does not. Every workflow type the worker
 * registers (the exports of workflows/index.ts, which the bundle is made from) must have a recorded
 * history, so a new type cannot ship without one; a history's type is the one its first event names.
 *
 * (protobufjs is a direct dependency of vmplane only so that npm installs one copy for every
 * @temporalio package: with a copy each, the SDK's history parser fails with "type must be a Type".)
 */
import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import { Worker } from '@temporalio/worker'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { WORKFLOW_BUNDLE_PATH, WORKFLOWS_PATH } from '../../worker/workflow-bundle.js'

const HISTORIES = join(REPO_ROOT, 'test', 'replay', 'histories')

interface History { events: [{ workflowExecutionStartedEventAttributes: { workflowType: { name: string } } }, ...unknown[]] }

/** The workflow types the worker registers: every function workflows/index.ts exports. */
async function registeredWorkflowTypes (): Promise<string[]> {
  const workflows: Record<string, unknown> = await import(pathToFileURL(WORKFLOWS_PATH).href)
  return Object.keys(workflows).filter((name) => typeof workflows[name] === 'function').sort()
}

describe('replay of recorded histories', async () => {
  const files = (await readdir(HISTORIES)).filter((name) => name.endsWith('.json')).sort()
  const histories = await Promise.all(files.map(async (name) => ({
    workflowId: name,
    history: JSON.parse(await readFile(join(HISTORIES, name), 'utf8')) as History
  })))

  it('has a history of every workflow type the worker registers', async () => {
    const recorded = new Set(histories.map(({ history }) => history.events[0].workflowExecutionStartedEventAttributes.workflowType.name))
    const missing = (await registeredWorkflowTypes()).filter((type) => !recorded.has(type))
    assert.deepEqual(missing, [], `no recorded history of ${missing.join(', ')} (test/replay/record-histories.ts records them)`)
  })

  it('replays every one of them on the current workflow bundle', async () => {
    const failures: string[] = []
    for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }, histories)) {
      if (result.error !== undefined) failures.push(`${result.workflowId}: ${result.error.message}`)
    }
    assert.deepEqual(failures, [])
  })
})
