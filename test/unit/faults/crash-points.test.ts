/**
 * Crash points (faults/crash-points.ts): a plan fires once, at its point, on a running victim; a
 * plan whose victim is not running (killed, not restarted yet) waits for a later pass, and the
 * point never throws into the code it sits in. The crash campaign on the cluster shape failed a
 * create when a round's kill of the worker landed between the plan's arming and an agent's pass
 * at the point: the worker's PID file was gone, the point threw, and the agent failed the VMM's
 * devices.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { CrashPlan } from '../../../faults/crash-points.js'

describe('crash points', () => {
  let runDir: string
  let crashPoint: typeof import('../../../faults/crash-points.js').crashPoint
  let planFile: string
  const arm = async (plan: CrashPlan): Promise<void> => { await writeFile(planFile, JSON.stringify(plan)) }

  before(async () => {
    runDir = await mkdtemp(join(tmpdir(), 'vmp-crash-points-'))
    // The module reads its run directory once, when it loads.
    process.env.VMPLANE_CRASH_POINTS = runDir
    const module = await import('../../../faults/crash-points.js')
    crashPoint = module.crashPoint
    planFile = module.crashPlanFile(runDir)
  })
  after(async () => {
    delete process.env.VMPLANE_CRASH_POINTS
    await rm(runDir, { recursive: true, force: true })
  })

  it('signals a running victim at the plan\'s point, once', async () => {
    const victim = await sleeper()
    await writeFile(join(runDir, 'worker.pid'), `${victim.pid}\n`)
    await arm({ point: 'agent.tap.after-create', kill: 'worker' })
    crashPoint('agent.disk.after-create')
    assert.ok(existsSync(planFile), 'another point leaves the plan armed')
    crashPoint('agent.tap.after-create')
    assert.equal(await exitSignal(victim), 'SIGKILL')
    assert.equal(existsSync(planFile), false, 'the plan fired once')
  })

  it('leaves the plan armed, and does not throw, while the victim has no PID file (between its kill and its restart)', async () => {
    await rm(join(runDir, 'worker.pid'), { force: true })
    await arm({ point: 'agent.tap.after-create', kill: 'worker' })
    assert.doesNotThrow(() => { crashPoint('agent.tap.after-create') })
    assert.ok(existsSync(planFile))
  })

  it('leaves the plan armed, and does not throw, while the PID file names a process that has ended', async () => {
    const ended = await sleeper()
    ended.kill('SIGKILL')
    await exitSignal(ended)
    await writeFile(join(runDir, 'worker.pid'), `${ended.pid}\n`)
    await arm({ point: 'agent.tap.after-create', kill: 'worker' })
    assert.doesNotThrow(() => { crashPoint('agent.tap.after-create') })
    assert.ok(existsSync(planFile))
  })

  it('fires the plan left armed once the victim runs again', async () => {
    const restarted = await sleeper()
    await writeFile(join(runDir, 'worker.pid'), `${restarted.pid}\n`)
    crashPoint('agent.tap.after-create')
    assert.equal(await exitSignal(restarted), 'SIGKILL')
    assert.equal(existsSync(planFile), false)
  })
})

async function sleeper (): Promise<ChildProcess> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' })
  await new Promise((resolve, reject) => { child.once('spawn', resolve).once('error', reject) })
  return child
}

async function exitSignal (child: ChildProcess): Promise<NodeJS.Signals | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.signalCode
  return await new Promise((resolve) => child.once('exit', (_code, signal) => { resolve(signal) }))
}
