/**
 * A host's monitor (workflows/monitor-host.ts) in the fast layer: an operator's action that
 * arrived while the previous run continued as new is carried into the next run and carried out.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { hostWorkflowId } from '../../domain/ids.js'
import type { MonitorHostInput } from '../../contract/workflows.js'
import { startWorkflowEnvironment, type WorkflowEnvironment } from '../helpers/workflow-environment.js'

const TASK_QUEUE = 'monitor-host-test'

describe('host monitors (workflow logic)', { timeout: 60_000 }, () => {
  let env: WorkflowEnvironment
  before(async () => { env = await startWorkflowEnvironment(TASK_QUEUE) })
  after(async () => { await env?.stop() })

  it('carries out an operator\'s action handed over by the run that continued as new', async () => {
    const input: MonitorHostInput = { hostId: 'host-9', lastAnnouncement: null, operatorAction: 'readmit' }
    const handle = await env.client.workflow.start('monitorHost', { taskQueue: TASK_QUEUE, workflowId: hostWorkflowId('host-9'), args: [input] })
    const deadline = Date.now() + 20_000
    while (!env.world.hostActions.includes('readmit host-9')) {
      assert.ok(Date.now() < deadline, 'the readmit handed over was never carried out')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await handle.terminate('the test is done')
  })
})
