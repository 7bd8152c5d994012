/**
 * VMM processes outlive their agent, and a restarted agent takes them over: it re-adopts live
 * VMMs (PID and start time, never the PID alone), finishes a boot the dead agent left in flight,
 * re-arms a stop deadline, accounts for VMMs that died while it was away, and kills VMM
 * processes no record owns.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, before, describe, it } from 'node:test'
import type { VmmView } from '../../domain/host-agent-api.js'
import { launchVmm, vmmPaths } from '../../host-agent/cloud-hypervisor/launch.js'
import { freePorts } from '../helpers/launcher.js'
import { waitUntil } from '../../stack/wait.js'
import { AGENT_ENTRY } from '../../stack/components.js'
import { agentRecord, newVmmId, TestAgent } from './helpers/agent.js'
import { buildSimulator, processExists, SIMULATOR_BINARY } from './helpers/simulator.js'

let agent: TestAgent

before(async () => { await buildSimulator() })
afterEach(async () => { await agent?.cleanup() })

async function freshAgent (): Promise<TestAgent> {
  agent = await TestAgent.create()
  await agent.start()
  return agent
}

async function waitForExit (pid: number): Promise<void> {
  await waitUntil(`process ${pid} gone`, async () => !processExists(pid), { timeoutMs: 5000, intervalMs: 20 })
}

describe('agent restart', () => {
  it('SIGKILL of the agent leaves VMMs running; the new agent adopts them, finishes a boot, and stops them', async () => {
    await freshAgent()
    const a = await agent.ensureRunning('sim.shutdown_ms=50')
    const b = await agent.ensureRunning()
    const booting = await agent.ensure('sim.boot_ms=2500')
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal((await agent.vmm(booting.id)).state, 'starting')

    await agent.kill('SIGKILL')
    for (const vmm of [a, b, booting]) assert.ok(processExists(vmm.pid!), `VMM ${vmm.id} survives its agent`)

    await agent.start()
    const views = (await agent.request<{ items: VmmView[] }>('GET', '/v1/vmms')).body.items
    assert.deepEqual(views.map((v) => v.pid).sort(), [a.pid, b.pid, booting.pid].sort())
    const running = await agent.waitForState(booting.id, 'running', 15_000)
    assert.equal(running.pid, booting.pid, 'the boot finished in the same process')
    assert.equal((await agent.vmmProcesses()).length, 3, 'no VMM was duplicated')

    await agent.request('POST', `/v1/vmms/${a.id}/power-button`, { killAfterMs: 30_000 })
    assert.equal((await agent.waitForState(a.id, 'destroyed')).exit?.cause, 'guest-poweroff')
    const killed = await agent.request('DELETE', `/v1/vmms/${b.id}`)
    assert.equal(killed.body.state, 'destroyed')
    assert.equal(processExists(b.pid!), false)
  })

  it('SIGTERM stops the agent cleanly without touching its VMMs', async () => {
    await freshAgent()
    const vmm = await agent.ensureRunning()
    await agent.kill('SIGTERM')
    assert.equal(agent.child, null)
    assert.ok(processExists(vmm.pid!))
    await agent.start()
    const adopted = await agent.vmm(vmm.id)
    assert.equal(adopted.state, 'running')
    assert.equal(adopted.pid, vmm.pid)
  })

  it('re-arms a stop deadline after a restart and kills on time', async () => {
    await freshAgent()
    const vmm = await agent.ensureRunning('sim.ignore_power_button')
    await agent.request('POST', `/v1/vmms/${vmm.id}/power-button`, { killAfterMs: 2000 })
    await agent.kill('SIGKILL')
    await agent.start()
    const destroyed = await agent.waitForState(vmm.id, 'destroyed')
    assert.equal(destroyed.exit?.cause, 'stop-deadline')
    assert.equal(processExists(vmm.pid!), false)
  })

  it('accounts for VMMs that died while it was away: a clean power-off, and a vanished one', async () => {
    await freshAgent()
    const poweredOff = await agent.ensureRunning('sim.poweroff_ms=800')
    const vanished = await agent.ensureRunning()
    await agent.kill('SIGKILL')
    process.kill(vanished.pid!, 'SIGKILL')
    await waitForExit(poweredOff.pid!)
    await waitForExit(vanished.pid!)
    await agent.start()
    const clean = await agent.vmm(poweredOff.id)
    assert.equal(clean.state, 'destroyed')
    assert.equal(clean.exit?.cause, 'guest-poweroff', 'the event file ends with vmm shutdown')
    const gone = await agent.vmm(vanished.id)
    assert.equal(gone.state, 'failed')
    assert.deepEqual(gone.exit, { cause: 'vanished', code: null, signal: null })
  })

  it('is not fooled by a reused PID: a live process with another start time is not the VMM', async () => {
    agent = await TestAgent.create()
    const impostor = spawn('sleep', ['30'], { stdio: 'ignore' })
    try {
      const record = agentRecord({ pid: impostor.pid!, pidStartTime: '1' })
      const { id } = record
      await mkdir(join(agent.vmmsDir, id), { recursive: true })
      await writeFile(join(agent.vmmsDir, id, 'record.json'), JSON.stringify(record))
      await agent.start()
      const view = await agent.vmm(id)
      assert.equal(view.state, 'failed')
      assert.equal(view.exit?.cause, 'vanished')
      assert.ok(processExists(impostor.pid!), 'the unrelated process was left alone')
      const destroyed = await agent.request('DELETE', `/v1/vmms/${id}`)
      assert.equal(destroyed.body.state, 'destroyed')
      assert.ok(processExists(impostor.pid!), 'a delete does not kill it either')
    } finally {
      impostor.kill('SIGKILL')
    }
  })

  it('kills VMM processes of its own making that no record owns', async () => {
    agent = await TestAgent.create()
    const paths = vmmPaths(join(agent.vmmsDir, newVmmId()))
    await mkdir(paths.dir, { recursive: true })
    const stray = launchVmm(SIMULATOR_BINARY, paths)
    await waitUntil('the stray VMM up', async () => (await agent.vmmProcesses()).length === 1, { timeoutMs: 5000, intervalMs: 20 })
    await agent.start()
    await waitForExit(stray.pid!)
    assert.equal((await agent.request<{ items: VmmView[] }>('GET', '/v1/vmms')).body.items.length, 0)
  })
})

/** Starts an agent process that is expected to refuse to start; returns its exit code and output. */
async function refusedStart (env: NodeJS.ProcessEnv): Promise<{ code: number | null, output: string }> {
  const child = spawn(process.execPath, [AGENT_ENTRY], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr!.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const [code] = await once(child, 'exit') as [number | null]
  return { code, output }
}

describe('start-up checks', () => {
  it('refuses to start on a state directory another live agent owns', async () => {
    await freshAgent()
    const { code, output } = await refusedStart({ ...agent.env, VMPLANE_AGENT_PORT: String(await freePorts(1)) })
    assert.equal(code, 1)
    assert.match(output, /another agent \(pid \d+\) is running/)
  })

  it('refuses a state directory too long for the VMM sockets', async () => {
    agent = await TestAgent.create()
    const { code, output } = await refusedStart({ ...agent.env, VMPLANE_AGENT_STATE_DIR: join(agent.root, 'x'.repeat(60)) })
    assert.equal(code, 1)
    assert.match(output, /VMPLANE_AGENT_STATE_DIR is too long/)
  })

  it('refuses a missing cloud-hypervisor program, a bad setting and a missing underlay device', async () => {
    agent = await TestAgent.create()
    const missing = await refusedStart({ ...agent.env, VMPLANE_CLOUD_HYPERVISOR: join(agent.root, 'no-such-program') })
    assert.equal(missing.code, 1)
    assert.match(missing.output, /cannot find an executable/)
    const bad = await refusedStart({ ...agent.env, VMPLANE_AGENT_TOKEN: 'short' })
    assert.equal(bad.code, 2)
    assert.match(bad.output, /VMPLANE_AGENT_TOKEN: must be at least 16 characters/)
    const noUnderlay = await refusedStart({ ...agent.env, VMPLANE_AGENT_UNDERLAY: 'nolan0' })
    assert.equal(noUnderlay.code, 1)
    assert.match(noUnderlay.output, new RegExp(`no device nolan0 in network namespace ${agent.network.netns} to carry networks' VXLAN`))
  })
})
