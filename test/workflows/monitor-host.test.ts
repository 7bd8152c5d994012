/**
 * A host's monitor (workflows/monitor-host.ts) in the fast layer: an operator's action that
 * arrived while the previous run continued as new is carried into the next run and carried out.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { TestWorkflowEnvironment } from '@temporalio/testing'
import { Worker } from '@temporalio/worker'
import { hostWorkflowId } from '../../domain/ids.js'
import { WORKFLOW_BUNDLE_PATH } from '../../worker/workflow-bundle.js'
import type { MonitorHostInput } from '../../workflows/definitions.js'
import { SEARCH_ATTRIBUTE_KEYS } from '../../workflows/search-attributes.js'
import { WorkflowWorld } from '../helpers/workflow-world.js'

const TASK_QUEUE = 'monitor-host-test'

describe('host monitors (workflow logic)', { timeout: 60_000 }, () => {
  let env: TestWorkflowEnvironment
  let world: WorkflowWorld
  let worker: Worker
  let running: Promise<void>

  before(async () => {
    const temporal = process.env.TEMPORAL_CLI
    assert.ok(temporal, 'TEMPORAL_CLI names the Temporal CLI (npm test sets it)')
    env = await TestWorkflowEnvironment.createLocal({
      server: { executable: { type: 'existing-path', path: temporal }, searchAttributes: SEARCH_ATTRIBUTE_KEYS }
    })
    world = new WorkflowWorld()
    worker = await Worker.create({ connection: env.nativeConnection, taskQueue: TASK_QUEUE, workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH }, activities: world.activities() })
    running = worker.run()
  })
  after(async () => {
    worker?.shutdown()
    await running
    await env?.teardown()
  })

  it('carries out an operator\'s action handed over by the run that continued as new', async () => {
    const input: MonitorHostInput = { hostId: 'host-9', lastAnnouncement: null, operatorAction: 'readmit' }
    const handle = await env.client.workflow.start('monitorHost', { taskQueue: TASK_QUEUE, workflowId: hostWorkflowId('host-9'), args: [input] })
    const deadline = Date.now() + 20_000
    while (!world.hostActions.includes('readmit host-9')) {
      assert.ok(Date.now() < deadline, 'the readmit handed over was never carried out')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await handle.terminate('the test is done')
  })
})
