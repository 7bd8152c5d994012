/**
 * Stops that find host reports waiting (workflows/execution.ts, "one at a time").
 *
 * The report pump and the stop both write through local activities. While the worker is frozen,
 * each instance gets a stop and, from two restarts of its host agent, two reports: the stop's
 * execution then begins with reports to apply and a halt to run. Had the two sides' writes run
 * side by side, the pump's first one (the lighter) would end before the stop's and the pump would
 * ask for the next before the stop went on; a replay gives both results together, the stop goes
 * on first and takes the next sequence number. Such a history does not replay, and a worker that
 * restarts on it leaves the instance stuck `stopping` (found by the crash campaign).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Client, Connection } from '@temporalio/client'
import { instanceWorkflowId } from '../../domain/ids.js'
import { replayExecutions } from '../helpers/replay-executions.js'
import { waitFor } from '../../stack/wait.js'
import { runningInstanceAtRest, waitForState } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const INSTANCES = 4
const REPORTS = 2

describe('stops that find host reports waiting', { timeout: 5 * 60_000 }, () => {
  let stack: TestStack
  before(async () => { stack = await startStack({ hosts: 1 }) })
  after(async () => { await stack?.stop() })

  it('apply the reports and stop, and every history replays', async () => {
    const instances = await Promise.all(Array.from({ length: INSTANCES }, async (_, i) => await runningInstanceAtRest(stack, `waiting-${i}`)))
    const workflowIds = instances.map((instance) => instanceWorkflowId(instance.id))
    const worker = await stack.kill('worker', 'SIGSTOP')
    const connection = await Connection.connect({ address: stack.info.temporalAddress })
    try {
      for (const { id } of instances) {
        const stop = await api(stack).post(`/v1/instances/${id}/stop`, { graceSeconds: 5 })
        assert.equal(stop.status, 202, JSON.stringify(stop.body))
      }
      const client = new Client({ connection, namespace: stack.info.namespace })
      for (let reports = 1; reports <= REPORTS; reports++) {
        // A restarted agent reports every live VMM once.
        await stack.kill('agent-host-1')
        await stack.waitForRestart('agent-host-1')
        await waitFor(`${reports} report(s) waiting at every stop`, async () => {
          const counts = await Promise.all(workflowIds.map(async (workflowId) => await reportsReceived(client, workflowId)))
          return counts.every((n) => n >= reports) ? true : null
        }, { timeoutMs: 30_000 })
      }
    } finally {
      process.kill(worker, 'SIGCONT')
      await connection.close()
    }
    for (const { id } of instances) {
      const stopped = await waitForState(stack, id, 'stopped')
      assert.equal(stopped.vmm?.state, 'destroyed')
    }
    const query = workflowIds.map((id) => `WorkflowId = '${id}'`).join(' OR ')
    const { replayed, failures } = await replayExecutions(stack.info, query)
    assert.deepEqual(failures, [])
    assert.ok(replayed >= 2 * INSTANCES, `${replayed} executions replayed: each instance's create and stop`)
  })
})

async function reportsReceived (client: Client, workflowId: string): Promise<number> {
  const { events } = await client.workflow.getHandle(workflowId).fetchHistory()
  return (events ?? []).filter((event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'vmmReport').length
}
