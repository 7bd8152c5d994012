/**
 * A VMM's life through the agent's HTTP API, on a real agent process running real simulated
 * VMMs: ensure (idempotent), running, stop with a deadline (graceful and forced), kill,
 * tombstones, reboots, crashes, failed boots, a wedged API, garbage events and a VMM that dies
 * in the middle of a request. Temporal is not running here: reports are retried in vain, which
 * must not matter.
 */
import assert from 'node:assert/strict'
import { access } from 'node:fs/promises'
import { describe, it } from 'node:test'
import type { VmmView } from '../../domain/host-agent-api.js'
import { ensureBody, newVmmId, TestAgent, useAgent } from './helpers/agent.js'
import { processExists } from './helpers/simulator.js'

let agent!: TestAgent
useAgent((started) => { agent = started })

async function ensureRunning (cmdline?: string): Promise<{ id: string, view: VmmView }> {
  const view = await agent.ensureRunning(cmdline)
  return { id: view.id, view }
}

describe('ensure', () => {
  it('records, spawns and boots a VMM, and answers 201 once the VM runs', async () => {
    const id = newVmmId()
    const created = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody())
    assert.equal(created.status, 201)
    assert.deepEqual([created.body.state, created.body.generation, created.body.reason], ['running', 2, 'VM booted'])
    assert.equal(created.body.hostId, 'host-test')
    assert.ok(created.body.pid !== null && processExists(created.body.pid))
  })

  it('answers a boot slower than the answer waits for `starting`, and runs it all the same', async () => {
    const id = newVmmId()
    const created = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('sim.boot_ms=4000'))
    assert.equal(created.status, 201)
    assert.deepEqual([created.body.state, created.body.generation], ['starting', 1])
    const again = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('sim.boot_ms=4000', created.body.instanceId))
    assert.equal(again.status, 200)
    const running = await agent.waitForState(id, 'running')
    assert.equal(running.generation, 2)
  })

  it('is idempotent on the VMM ID: the same VMM, never a second process', async () => {
    const id = newVmmId()
    const body = ensureBody()
    const [first, second] = await Promise.all([
      agent.request('PUT', `/v1/vmms/${id}`, body),
      agent.request('PUT', `/v1/vmms/${id}`, body)
    ])
    assert.deepEqual([first.status, second.status].sort(), [200, 201])
    const running = await agent.waitForState(id, 'running')
    const again = await agent.request('PUT', `/v1/vmms/${id}`, body)
    assert.equal(again.status, 200)
    assert.equal(again.body.pid, running.pid)
    const processes = (await agent.vmmProcesses()).filter((p) => p.argv.some((arg) => arg.includes(id)))
    assert.equal(processes.length, 1)
  })

  it("refuses another instance's VMM ID and a different spec with 409", async () => {
    const { id } = await ensureRunning()
    const other = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody())
    assert.equal(other.status, 409)
    assert.deepEqual(Object.keys(other.body as object), ['error', 'message'])
    const mine = (await agent.vmm(id)).instanceId
    const changed = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('console=hvc0', mine))
    assert.equal(changed.status, 409)
  })

  it('lists every VMM it has a record of', async () => {
    const { id } = await ensureRunning()
    const list = await agent.request<{ items: VmmView[] }>('GET', '/v1/vmms')
    assert.equal(list.status, 200)
    assert.ok(list.body.items.some((vmm) => vmm.id === id))
  })
})

describe('stop with a deadline', () => {
  it('ends gracefully when the guest honours the power button', async () => {
    // The guest takes a second to power off, so the press is answered while it is still stopping.
    const { id } = await ensureRunning('sim.shutdown_ms=1000')
    const pressed = await agent.request('POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 30_000 })
    assert.equal(pressed.status, 200)
    assert.equal(pressed.body.state, 'stopping')
    const destroyed = await agent.waitForState(id, 'destroyed')
    assert.deepEqual(destroyed.exit, { cause: 'guest-poweroff', code: 0, signal: null })
    assert.equal(destroyed.reason, 'guest powered off')
  })

  it('kills the VMM at the deadline when the guest ignores the power button', async () => {
    const { id, view } = await ensureRunning('sim.ignore_power_button')
    await agent.request('POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 1000 })
    const destroyed = await agent.waitForState(id, 'destroyed')
    assert.deepEqual(destroyed.exit, { cause: 'stop-deadline', code: null, signal: 'SIGKILL' })
    assert.equal(destroyed.reason, 'stop grace period expired; VMM killed')
    assert.equal(processExists(view.pid!), false)
  })

  it('keeps the earlier of two deadlines', async () => {
    const { id } = await ensureRunning('sim.ignore_power_button')
    const early = await agent.request('POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 1000 })
    const later = await agent.request('POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 60_000 })
    assert.equal(later.body.stopDeadline, early.body.stopDeadline)
    assert.equal((await agent.waitForState(id, 'destroyed')).exit?.cause, 'stop-deadline')
  })

  it('kills on time a VMM whose boot never returns (its API is wedged)', async () => {
    const id = newVmmId()
    await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('sim.boot_ms=never'))
    const pressed = await agent.request('POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 1000 })
    assert.equal(pressed.status, 200)
    assert.equal(pressed.body.state, 'stopping')
    assert.equal((await agent.waitForState(id, 'destroyed')).exit?.cause, 'stop-deadline')
  })

  it('without a deadline, presses once and leaves the state alone', async () => {
    const { id } = await ensureRunning('sim.ignore_power_button')
    const pressed = await agent.request('POST', `/v1/vmms/${id}/power-button`, {})
    assert.equal(pressed.status, 200)
    assert.equal(pressed.body.state, 'running')
  })
})

describe('kill', () => {
  it('SIGKILLs the process group, waits, cleans up the socket and answers destroyed; idempotent', async () => {
    const { id, view } = await ensureRunning()
    const killed = await agent.request('DELETE', `/v1/vmms/${id}`)
    assert.equal(killed.status, 200)
    assert.equal(killed.body.state, 'destroyed')
    assert.deepEqual(killed.body.exit, { cause: 'killed', code: null, signal: 'SIGKILL' })
    assert.equal(processExists(view.pid!), false)
    const socket = `${agent.vmmsDir}/${id}/api.sock`
    await assert.rejects(access(socket))
    await assert.rejects(access(`${socket}.lock`))
    const again = await agent.request('DELETE', `/v1/vmms/${id}`)
    assert.equal(again.status, 200)
    assert.equal(again.body.generation, killed.body.generation)
  })

  it('keeps a tombstone: ensure on a destroyed VMM ID is 409, so a late retry cannot bring it back', async () => {
    const id = newVmmId()
    const body = ensureBody()
    await agent.request('PUT', `/v1/vmms/${id}`, body)
    await agent.request('DELETE', `/v1/vmms/${id}`)
    const retry = await agent.request('PUT', `/v1/vmms/${id}`, body)
    assert.equal(retry.status, 409)
    assert.equal((await agent.vmmProcesses()).filter((p) => p.argv.some((arg) => arg.includes(id))).length, 0)
  })

  it('answers 404 for a VMM it has no record of', async () => {
    assert.equal((await agent.request('DELETE', `/v1/vmms/${newVmmId()}`)).status, 404)
    assert.equal((await agent.request('GET', `/v1/vmms/${newVmmId()}`)).status, 404)
  })

  it('fences an ID deleted before it was ever created: a late ensure of it is 409 and starts nothing', async () => {
    const id = newVmmId()
    assert.equal((await agent.request('DELETE', `/v1/vmms/${id}`)).status, 404)
    const late = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody())
    assert.equal(late.status, 409)
    assert.equal((await agent.request('GET', `/v1/vmms/${id}`)).status, 404)
    assert.equal((await agent.vmmProcesses()).filter((p) => p.argv.some((arg) => arg.includes(id))).length, 0)
  })
})

describe('observation', () => {
  // These VMMs end 100 ms after boot, which may come before a poll sees them running on a busy
  // machine; the tests wait for the end they name, not for the running state in between.
  it('reports a crash with its signal or exit code', async () => {
    const { id: segv } = await agent.ensure('sim.crash_after_ms=100 sim.crash_signal=SEGV')
    const crashed = await agent.waitForState(segv, 'failed')
    assert.deepEqual(crashed.exit, { cause: 'crashed', code: null, signal: 'SIGSEGV' })
    assert.equal(crashed.reason, 'VMM killed by SIGSEGV')
    const { id: coded } = await agent.ensure('sim.crash_after_ms=100 sim.exit_code=3')
    assert.equal((await agent.waitForState(coded, 'failed')).reason, 'VMM exited with code 3')
  })

  it('reports a guest that powers itself off as destroyed by guest power-off', async () => {
    const { id } = await agent.ensure('sim.poweroff_ms=100')
    assert.equal((await agent.waitForState(id, 'destroyed')).exit?.cause, 'guest-poweroff')
  })

  it('fails a VMM whose boot fails, with the VMM error chain, and kills its process', async () => {
    const id = newVmmId()
    const created = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('sim.kernel_load_error'))
    const failed = await agent.waitForState(id, 'failed')
    assert.equal(failed.exit?.cause, 'boot-failed')
    assert.match(failed.reason!, /Cannot load the kernel into memory: Invalid ELF magic number/)
    assert.equal(processExists(created.body.pid!), false)
  })

  it('reboots in the same process: rebooting, then running', async () => {
    const { id, view } = await ensureRunning('sim.reboot_ms=200')
    const rebooting = await agent.request('POST', `/v1/vmms/${id}/reboot`)
    assert.equal(rebooting.status, 200)
    assert.equal(rebooting.body.state, 'rebooting')
    const running = await agent.waitForVmm(id, 'rebooted', (v) => v.state === 'running' && v.reason === 'VM rebooted')
    assert.equal(running.pid, view.pid)
    assert.equal((await agent.request('POST', `/v1/vmms/${id}/reboot`, {})).status, 200)
  })

  it('kills a VMM whose reboot fails: the old VM cannot be trusted, the control plane replaces it', async () => {
    const { id, view } = await ensureRunning('sim.reboot_error')
    assert.equal((await agent.request('POST', `/v1/vmms/${id}/reboot`)).status, 200)
    const failed = await agent.waitForState(id, 'failed')
    assert.equal(failed.exit?.cause, 'boot-failed')
    assert.match(failed.reason!, /^reboot failed: .*could not reboot/)
    assert.equal(processExists(view.pid!), false)
  })

  it('records a reboot the guest started itself, from the event file', async () => {
    const { id, view } = await ensureRunning('sim.guest_reboot_ms=300')
    const rebooted = await agent.waitForVmm(id, 'guest reboot seen', (v) => v.reason === 'the guest rebooted')
    assert.equal(rebooted.state, 'running')
    assert.ok(rebooted.generation >= view.generation + 2)
  })

  it('shows an API that stops answering as a condition, not death, and still kills it', async () => {
    const { id, view } = await ensureRunning('sim.hang_api_after_ms=100')
    const unresponsive = await agent.waitForVmm(id, 'unresponsive', (v) => v.unresponsiveSince !== null)
    assert.equal(unresponsive.state, 'running')
    assert.ok(processExists(view.pid!))
    const killed = await agent.request('DELETE', `/v1/vmms/${id}`)
    assert.equal(killed.body.state, 'destroyed')
    assert.equal(killed.body.unresponsiveSince, null)
  })

  it('survives garbage in the event file', async () => {
    const { id } = await ensureRunning('sim.garbage_events sim.guest_reboot_ms=200')
    await agent.waitForVmm(id, 'guest reboot seen after the garbage', (v) => v.reason === 'the guest rebooted')
    assert.equal((await fetch(`${agent.url}/healthz`)).status, 200)
  })

  it('survives a VMM that dies in the middle of a request, and reports it crashed', async () => {
    const id = newVmmId()
    const created = await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('sim.boot_ms=never'))
    await new Promise((resolve) => setTimeout(resolve, 200))
    process.kill(created.body.pid!, 'SIGKILL')
    const failed = await agent.waitForState(id, 'failed')
    assert.deepEqual(failed.exit, { cause: 'crashed', code: null, signal: 'SIGKILL' })
    assert.equal((await fetch(`${agent.url}/healthz`)).status, 200)
  })
})
