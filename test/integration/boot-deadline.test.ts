/**
 * The boot deadline: a VM that does not reach `running` within VMPLANE_BOOT_TIMEOUT_SECONDS is
 * killed and its start fails with BootTimeout; but a VM that did reach it, whose report is merely
 * late, is kept (I2: no report is not a positive signal). The late report is made the way the
 * 4,000-instance campaign met it: Temporal's server stalls (here frozen with SIGSTOP) across the
 * deadline, and the agent's outbox, backing off, delivers the `running` report after the
 * deadline's timer has fired.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { newInstance, vmmProcesses, waitForInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const BOOT_TIMEOUT_SECONDS = 3

describe('the boot deadline', () => {
  let stack: TestStack
  before(async () => {
    stack = await startStack({
      hosts: 1,
      env: { VMPLANE_BOOT_TIMEOUT_SECONDS: String(BOOT_TIMEOUT_SECONDS), VMPLANE_REPORT_RETRY_MAX_SECONDS: '20' }
    })
  })
  after(async () => { await stack?.stop() })

  async function create (name: string, cmdline: string): Promise<InstanceBody> {
    const { status, body } = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', newInstance(name, cmdline))
    assert.equal(status, 202, JSON.stringify(body))
    return body.instance
  }

  it('kills a VM that never boots and fails its start with BootTimeout', async () => {
    const created = await create('never-boots', 'sim.boot_ms=never')
    const placed = await waitForInstance(stack, created.id, (i) => i.vmm !== null)
    const failed = await waitForState(stack, created.id, 'stopped', 60_000)
    assert.equal(failed.lastError?.code, 'BootTimeout')
    assert.deepEqual(await vmmProcesses(stack, placed.vmm!), [], 'the VMM process was killed')
  })

  it('keeps a VM that booted in time though its running report arrives after the deadline', async () => {
    const created = await create('late-report', 'sim.boot_ms=1000')
    const placed = await waitForInstance(stack, created.id, (i) => i.vmm !== null)
    await stack.kill('temporal', 'SIGSTOP')
    try {
      // The VM boots after 1 s; its report cannot reach the frozen server, and the outbox backs
      // off. The deadline passes meanwhile.
      await sleep((BOOT_TIMEOUT_SECONDS + 5) * 1000)
    } finally {
      await stack.kill('temporal', 'SIGCONT')
    }
    const running = await waitForState(stack, created.id, 'running', 90_000)
    assert.equal(running.lastError, null)
    assert.equal(running.vmm?.id, placed.vmm!.id, 'the VM that booted is the one kept')
    assert.equal((await vmmProcesses(stack, placed.vmm!)).length > 0, true)
  })
})
