/**
 * The frozen worker, at every write (docs/design.md §8): the worker is frozen (SIGSTOP) right
 * after each write of each operation has committed, for longer than a workflow task's timeout,
 * and a stop, delete, start or forceStop arrives during the freeze. Whatever path the execution
 * then takes, every accepted request must end recorded as what happened, and the instance must
 * be as its record says (test/helpers/invariants.ts).
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import type { CrashPoint } from '../../faults/crash-points.js'
import { checkInvariants, violationsOf, type InvariantReport } from '../helpers/invariants.js'
import { waitFor } from '../../stack/wait.js'
import { armCrashPlan, crashPlanFired } from '../helpers/crash-plans.js'
import { newInstance, waitForInstance, waitForState } from '../helpers/instances.js'
import { temporalCli } from '../helpers/operator.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

/** Longer than a workflow task's timeout (3 s). */
const FROZEN_MS = 5_000

type Operation = 'create' | 'start' | 'stop' | 'reboot' | 'delete'
type Arriving = 'stop' | 'delete' | 'start' | 'forceStop'

interface Case {
  operation: Operation
  /** The write after which the worker freezes: a crash point, and the kind of change for `change.after-commit`. */
  point: CrashPoint
  when?: string
  /** The request that arrives during the freeze. */
  arriving: Arriving
  /** The state the instance must end in. */
  ends: 'running' | 'stopped' | 'destroyed'
}

const CASES: Case[] = [
  { operation: 'create', point: 'place.after-commit', arriving: 'delete', ends: 'destroyed' },
  { operation: 'create', point: 'change.after-commit', when: 'operation-finished', arriving: 'stop', ends: 'stopped' },
  { operation: 'start', point: 'place.after-commit', arriving: 'stop', ends: 'stopped' },
  { operation: 'start', point: 'change.after-commit', when: 'operation-finished', arriving: 'delete', ends: 'destroyed' },
  { operation: 'stop', point: 'change.after-commit', when: 'operation-started', arriving: 'delete', ends: 'destroyed' },
  { operation: 'stop', point: 'change.after-commit', when: 'state-changed', arriving: 'delete', ends: 'destroyed' },
  { operation: 'stop', point: 'change.after-commit', when: 'operation-finished', arriving: 'start', ends: 'running' },
  { operation: 'reboot', point: 'change.after-commit', when: 'operation-started', arriving: 'forceStop', ends: 'stopped' },
  { operation: 'reboot', point: 'change.after-commit', when: 'operation-finished', arriving: 'delete', ends: 'destroyed' },
  { operation: 'delete', point: 'change.after-commit', when: 'operation-started', arriving: 'stop', ends: 'destroyed' },
  { operation: 'delete', point: 'change.after-commit', when: 'state-changed', arriving: 'start', ends: 'destroyed' }
]

interface Accepted { instance: { id: string }, operation: { id: string } | null }

describe('a worker frozen past the task timeout at every write, with a request arriving meanwhile', { timeout: 30 * 60_000 }, () => {
  let stack: TestStack
  let made = 0
  before(async () => {
    stack = await startStack({ hosts: 1, env: { VMPLANE_CRASH_POINTS: '1', VMPLANE_HOST_VCPUS: '1024' } })
  })
  after(async () => { await stack?.stop() })

  /** An instance in the state the operation starts from. */
  async function instanceFor (operation: Operation): Promise<string | null> {
    if (operation === 'create') return null
    const created = await api(stack).post<Accepted>('/v1/instances', { ...newInstance(`frozen-${++made}`, 'sim.shutdown_ms=0'), start: operation !== 'start' })
    assert.equal(created.status, 202, JSON.stringify(created.body))
    await waitForState(stack, created.body.instance.id, operation === 'start' ? 'stopped' : 'running')
    return created.body.instance.id
  }

  /** Sends a request; the operation it was accepted as, or null if it was answered at once (200) or refused. */
  async function send (method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<{ id: string, operation: string | null }> {
    const answer = await api(stack).request<Accepted>(method, path, body)
    assert.ok([200, 202, 409].includes(answer.status), `${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`)
    return { id: answer.body.instance?.id, operation: answer.status === 202 ? answer.body.operation?.id ?? null : null }
  }

  async function perform (operation: Operation, id: string | null): Promise<{ id: string, operation: string | null }> {
    switch (operation) {
      case 'create': return await send('POST', '/v1/instances', newInstance(`frozen-${++made}`, 'sim.shutdown_ms=0'))
      case 'delete': return await send('DELETE', `/v1/instances/${id}?graceSeconds=5`)
      case 'stop': return await send('POST', `/v1/instances/${id}/stop`, { graceSeconds: 5 })
      default: return await send('POST', `/v1/instances/${id}/${operation}`)
    }
  }

  async function arrive (arriving: Arriving, id: string): Promise<string | null> {
    switch (arriving) {
      case 'forceStop':
        await temporalCli(stack, 'workflow', 'signal', '-w', `instance-${id}`, '--name', 'forceStop', '--input', '{"reason":"the frozen-worker test"}')
        return null
      case 'delete': return (await send('DELETE', `/v1/instances/${id}?graceSeconds=0`)).operation
      case 'stop': return (await send('POST', `/v1/instances/${id}/stop`, { graceSeconds: 0 })).operation
      case 'start': return (await send('POST', `/v1/instances/${id}/start`)).operation
    }
  }

  for (const { operation, point, when, arriving, ends } of CASES) {
    it(`${operation}, frozen after ${point}${when === undefined ? '' : ` (${when})`}, ${arriving} arriving: ends ${ends}`, async () => {
      const existing = await instanceFor(operation)
      await armCrashPlan(stack, { point, kill: 'worker', signal: 'SIGSTOP', ...(when === undefined ? {} : { when }) })
      const first = await perform(operation, existing)
      const id = first.id
      await crashPlanFired(stack, `the worker frozen at ${point}`, 30_000)
      const worker = await stack.pid('worker')
      let second: string | null
      try {
        second = await arrive(arriving, id)
        await sleep(FROZEN_MS)
      } finally {
        await stack.kill('worker', 'SIGCONT')
      }

      // Every accepted request ends with a recorded outcome (I5)…
      const accepted = [first.operation, second].filter((op): op is string => op !== null)
      const outcomes = await waitFor('every accepted operation to end', async () => {
        const ops = await Promise.all(accepted.map(async (op) => (await api(stack).get<{ kind: string, status: string }>(`/v1/operations/${op}`)).body))
        return ops.every((op) => op.status !== 'running') ? ops : null
      }, { timeoutMs: 90_000, intervalMs: 200 })
      // …as what happened: the instance ends where its last request took it, and a halt that
      // was accepted succeeded.
      const instance = await waitForInstance(stack, id, (i) => i.operation === null && i.state === ends, 90_000)
      assert.equal(instance.intendedState, ends === 'stopped' ? 'stopped' : ends)
      for (const op of outcomes) {
        if (op.kind === 'stop' || op.kind === 'delete') assert.equal(op.status, 'succeeded', JSON.stringify(outcomes))
      }
      if (ends === 'destroyed') assert.ok(outcomes.some((op) => op.kind === 'delete' && op.status === 'succeeded'))
      assert.equal(await stack.pid('worker'), worker, 'the worker was frozen, not restarted')
      let report: InvariantReport | null = null
      await waitFor('the stack to hold every invariant', async () => {
        report = await checkInvariants(stack.info)
        return violationsOf(report).length === 0 ? true : null
      }, { timeoutMs: 60_000, intervalMs: 500, detail: () => violationsOf(report ?? {} as InvariantReport).join('\n') })
    })
  }
})
