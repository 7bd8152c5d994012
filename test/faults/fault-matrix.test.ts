/**
 * The fault matrix (docs/design.md I3, I5): every operation, crashed at every step on its path, with
 * each of the worker, the host agent, Temporal's dev server and PostgreSQL SIGKILLed there in
 * turn (faults/crash-points.ts). The dev stack restarts what was killed, as a service manager
 * would; the client retries with its Idempotency-Key, as a careful one does. Each case asserts
 * that the point was reached, that the operation reached its outcome, and then that the whole
 * stack holds the invariants (test/helpers/invariants.ts): one VMM per running instance, no
 * VMM process without a live record, no leaked reservation, no orphan disk or TAP, no leaked or
 * shared address, every instance as its VMM is.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { CrashPoint } from '../../faults/crash-points.js'
import { isRunning } from '../../stack/processes.js'
import { sendUntilAnswered } from '../helpers/retrying-client.js'
import { waitFor } from '../../stack/wait.js'
import { CASE_TIMEOUT_MS, settled, startFaultStack } from '../helpers/fault-stack.js'
import { armCrashPlan, crashPlanFired } from '../helpers/crash-plans.js'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import type { TestStack } from '../helpers/stack.js'

type Operation = 'create' | 'start' | 'stop' | 'reboot' | 'delete'

interface Scenario {
  operation: Operation
  /** Of a stop or delete: 5 s lets the guest power off; 0 takes the kill branch at once. */
  graceSeconds?: number
  /** The steps on its path, in the order it passes them. */
  steps: CrashPoint[]
}

const SCENARIOS: Record<string, Scenario> = {
  create: {
    operation: 'create',
    steps: [
      'create.after-workflow-start', 'place.after-commit', 'agent.ensure.after-record', 'agent.disk.after-create',
      'agent.tap.after-create', 'agent.ensure.after-spawn', 'ensure.after-agent', 'change.after-commit'
    ]
  },
  // The disks were made at the create: a start makes its VMM's TAP, not its disks.
  start: {
    operation: 'start',
    steps: ['place.after-commit', 'agent.ensure.after-record', 'agent.tap.after-create', 'agent.ensure.after-spawn', 'ensure.after-agent', 'change.after-commit']
  },
  stop: { operation: 'stop', graceSeconds: 5, steps: ['change.after-commit', 'press.after-agent', 'agent.stop.after-deadline'] },
  'stop with grace 0 (the kill branch)': { operation: 'stop', graceSeconds: 0, steps: ['destroy.after-agent', 'agent.destroy.after-kill'] },
  reboot: { operation: 'reboot', steps: ['change.after-commit', 'reboot.after-agent'] },
  'delete with grace 0': { operation: 'delete', graceSeconds: 0, steps: ['change.after-commit', 'destroy.after-agent', 'agent.destroy.after-kill'] }
}
const KILLED = ['worker', 'agent-host-1', 'temporal', 'postgres'] as const
const OUTCOME: Record<Operation, string> = { create: 'running', start: 'running', stop: 'stopped', reboot: 'running', delete: 'destroyed' }

describe('the fault matrix', { timeout: 60 * 60_000 }, () => {
  let stack: TestStack
  let cases = 0
  before(async () => {
    stack = await startFaultStack(1)
  })
  const retries: string[] = []
  after(async () => {
    // Which kills made the API answer 5xx (and the client retry) depends on timing: listed, for
    // the report, not asserted.
    if (retries.length > 0) console.log(`requests retried with their Idempotency-Key:\n${retries.join('\n')}`)
    await stack?.stop()
  })

  async function send (method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<InstanceBody> {
    const response = await sendUntilAnswered<{ instance: InstanceBody }>(stack, method, path, body, { onRetry: (why) => retries.push(why) })
    assert.ok(response.status === 202 || response.status === 200, `${method} ${path} answered ${response.status}: ${JSON.stringify(response.body)}`)
    return response.body.instance
  }

  /** An instance in the state the operation starts from, made before any crash is planned. */
  async function instanceFor (operation: Operation): Promise<string | null> {
    if (operation === 'create') return null
    const name = `matrix-${operation}-${++cases}`
    const id = (await send('POST', '/v1/instances', { ...newInstance(name), start: operation !== 'start' })).id
    await waitForState(stack, id, operation === 'start' ? 'stopped' : 'running')
    return id
  }

  async function perform ({ operation, graceSeconds }: Scenario, id: string | null): Promise<string> {
    if (operation === 'create') return (await send('POST', '/v1/instances', newInstance(`matrix-create-${++cases}`))).id
    if (operation === 'delete') return (await send('DELETE', `/v1/instances/${id}?graceSeconds=${graceSeconds}`)).id
    return (await send('POST', `/v1/instances/${id}/${operation}`, operation === 'stop' ? { graceSeconds } : {})).id
  }

  for (const [name, scenario] of Object.entries(SCENARIOS)) {
    const { operation } = scenario
    describe(name, () => {
      for (const point of scenario.steps) {
        for (const killed of KILLED) {
          it(`${killed} killed at ${point}`, async () => {
            const id = await instanceFor(operation)
            const victim = await stack.pid(killed)
            await armCrashPlan(stack, { point, kill: killed })

            const instanceId = await perform(scenario, id)
            await crashPlanFired(stack, `the crash point ${point}`)
            await waitFor(`${killed} restarted`, async () => {
              const pid = await stack.pid(killed)
              return pid !== victim && await isRunning(pid) ? pid : null
            }, { timeoutMs: 60_000, detail: () => stack.tail() })
            assert.equal(await isRunning(victim), false, `${killed} (pid ${victim}) was killed`)

            const outcome = await waitForState(stack, instanceId, OUTCOME[operation], CASE_TIMEOUT_MS)
            if (operation !== 'delete') assert.notEqual(outcome.vmm, null)
            const report = await settled(stack)
            assert.ok(report.instances >= 1)
          })
        }
      }
    })
  }
})
