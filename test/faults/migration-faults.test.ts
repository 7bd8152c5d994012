/**
 * Live migration's fault matrix (issue 17): a migration crashed at each of its steps (the
 * target's process spawned, its receive issued, the source's send issued and answered, the
 * commit recorded), with each of the worker, the source's agent, the target's agent, Temporal's
 * dev server and PostgreSQL SIGKILLed there in turn. The dev stack restarts what was killed; the
 * client retries with its Idempotency-Key.
 *
 * Every cell ends with the migration's operation ended and exactly one running VMM for the
 * instance, on whichever side the migration left it, and the whole stack holding its invariants
 * (no duplicate or orphan VMM, no leaked reservation, disk, TAP or address). A second set stops
 * the instance right after the crash: it ends `stopped` with no VMM left on either side.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { CrashPoint } from '../../faults/crash-points.js'
import { isRunning } from '../../stack/processes.js'
import { sendUntilAnswered } from '../helpers/retrying-client.js'
import { waitFor } from '../../stack/wait.js'
import { CASE_TIMEOUT_MS, settled, startFaultStack } from '../helpers/fault-stack.js'
import { armCrashPlan, crashPlanFired } from '../helpers/crash-plans.js'
import { newInstance, vmmProcesses, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, type TestStack } from '../helpers/stack.js'

/** The steps of a migration, in order, and on which side each agent-side one fires. */
const STEPS: Array<{ point: CrashPoint, side?: 'source' | 'target' }> = [
  { point: 'agent.migration.after-target-spawn', side: 'target' },
  { point: 'agent.migration.after-receive', side: 'target' },
  { point: 'agent.migration.after-send', side: 'source' },
  { point: 'send.after-agent' },
  { point: 'migrate.after-commit' }
]
const KILLED = ['worker', 'source agent', 'target agent', 'temporal', 'postgres'] as const

describe('live migration, crashed at every step', { timeout: 60 * 60_000 }, () => {
  let stack: TestStack
  let cases = 0
  before(async () => {
    // A migration whose side was killed mid-way is given up on within the case's time.
    stack = await startFaultStack(2, { VMPLANE_MIGRATION_PROGRESS_TIMEOUT_SECONDS: '20' })
  })
  /** How each cell's migration ended, printed for the report: which crashes cost the migration. */
  const outcomes: string[] = []
  after(async () => {
    if (outcomes.length > 0) console.log(`migration outcomes:\n${outcomes.join('\n')}`)
    await stack?.stop()
  })

  async function send (method: 'POST', path: string, body?: unknown): Promise<{ instance: InstanceBody, operation: { id: string } | null }> {
    const response = await sendUntilAnswered<{ instance: InstanceBody, operation: { id: string } | null }>(stack, method, path, body)
    assert.ok(response.status === 202 || response.status === 200, `${method} ${path} answered ${response.status}: ${JSON.stringify(response.body)}`)
    return response.body
  }

  /** A running instance; its source host, and the other (the migration's target). */
  async function runningInstance (): Promise<{ id: string, source: string, target: string }> {
    const { instance } = await send('POST', '/v1/instances', newInstance(`mig-fault-${++cases}`))
    const running = await waitForState(stack, instance.id, 'running')
    const source = running.vmm!.hostId
    return { id: instance.id, source, target: stack.info.hosts.map((h) => h.id).find((h) => h !== source)! }
  }

  /** Kills `killed` at `point` of a migration of the instance, and waits for its restart. */
  async function crashMigration (step: typeof STEPS[number], killed: typeof KILLED[number], instance: { id: string, source: string, target: string }): Promise<string> {
    const component = killed === 'source agent' ? `agent-${instance.source}` : killed === 'target agent' ? `agent-${instance.target}` : killed
    const victim = await stack.pid(component)
    const host = step.side === undefined ? undefined : instance[step.side]
    await armCrashPlan(stack, { point: step.point, kill: component, ...(host === undefined ? {} : { host }) })
    const { operation } = await send('POST', `/v1/instances/${instance.id}/migrate`)
    await crashPlanFired(stack, `the crash point ${step.point}`)
    await waitFor(`${component} restarted`, async () => {
      const pid = await stack.pid(component)
      return pid !== victim && await isRunning(pid) ? pid : null
    }, { timeoutMs: 60_000, detail: () => stack.tail() })
    assert.equal(await isRunning(victim), false, `${component} (pid ${victim}) was killed`)
    return operation!.id
  }

  /** The instance's VMMs whose processes live, on either host. */
  async function liveVmmProcesses (instanceId: string): Promise<number> {
    const { body } = await api(stack).get<{ items: Array<{ source: { vmmId: string, hostId: string }, target: { vmmId: string, hostId: string } | null }> }>(`/v1/instances/${instanceId}/migrations`)
    const vmms = body.items.flatMap((m) => [m.source, ...(m.target === null ? [] : [m.target])])
    let live = 0
    for (const vmm of new Map(vmms.map((v) => [v.vmmId, v])).values()) live += (await vmmProcesses(stack, { id: vmm.vmmId, hostId: vmm.hostId })).length
    return live
  }

  for (const step of STEPS) {
    describe(step.point, () => {
      for (const killed of KILLED) {
        it(`${killed} killed: the migration ends with one running VMM`, async () => {
          const instance = await runningInstance()
          const operationId = await crashMigration(step, killed, instance)
          const outcome = await waitForInstance(stack, instance.id, (i) => i.state === 'running' && i.operation === null, CASE_TIMEOUT_MS)
          const { body: operation } = await api(stack).get<{ status: string }>(`/v1/operations/${operationId}`)
          assert.ok(['succeeded', 'failed'].includes(operation.status), `the migration ended: ${operation.status}`)
          outcomes.push(`${step.point}, ${killed} killed: ${operation.status}, the VM on the ${outcome.vmm!.hostId === instance.target ? 'target' : 'source'}`)
          assert.ok([instance.source, instance.target].includes(outcome.vmm!.hostId))
          await settled(stack)
          assert.equal(await liveVmmProcesses(instance.id), 1, 'exactly one VMM process of the instance lives')
        })
      }
      it('worker killed, then the instance stopped: no VMM is left on either side', async () => {
        const instance = await runningInstance()
        await crashMigration(step, 'worker', instance)
        await send('POST', `/v1/instances/${instance.id}/stop`, { graceSeconds: 0 })
        await waitForState(stack, instance.id, 'stopped', CASE_TIMEOUT_MS)
        await settled(stack)
        assert.equal(await liveVmmProcesses(instance.id), 0, 'no VMM process of the instance lives')
      })
    })
  }
})
