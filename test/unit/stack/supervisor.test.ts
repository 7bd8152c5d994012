/**
 * The supervisor cleans up after a component's process ends, as a service manager does: what
 * the process started and left behind, in its process group or, each in a session of its own, in
 * its working directory (PostgreSQL's backends, once their postmaster is killed), is killed before
 * the component is started again. A restart beside them failed: PostgreSQL refused to start while
 * its dead predecessor's backends still held its shared memory ("pre-existing shared memory block
 * is still in use"), and the crash campaign on the cluster shape counted an ending nobody caused.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { StackOutput } from '../../../stack/output.js'
import { isRunning, signalProcess } from '../../../stack/processes.js'
import { Supervisor } from '../../../stack/supervisor.js'
import { waitFor } from '../../../stack/wait.js'

let dir: string
let workDir: string
let supervisor: Supervisor

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vmp-supervisor-'))
  workDir = await mkdtemp(join(tmpdir(), 'vmp-supervisor-work-'))
  supervisor = new Supervisor(dir, new StackOutput(dir, false), 10_000)
})
after(async () => {
  await supervisor.killAll()
  await rm(dir, { recursive: true, force: true })
  await rm(workDir, { recursive: true, force: true })
})

/** Kills the component's process and returns its child, which must be gone once its successor runs. */
async function killAndRestart (name: string): Promise<{ child: number, first: number, second: number }> {
  const first = await waitFor(`${name} running`, async () => supervisor.pid(name), { timeoutMs: 10_000 })
  const child = await waitFor(`${name} naming its child`, async () => childPid(await log(name), first), { timeoutMs: 10_000 })
  assert.ok(await isRunning(child))
  signalProcess(first, 'SIGKILL')
  const second = await waitFor(`${name} started again`, async () => {
    const pid = supervisor.pid(name)
    return pid !== null && pid !== first ? pid : null
  }, { timeoutMs: 10_000 })
  return { child, first, second }
}

test('what a killed component left in its process group is gone before the component starts again', async () => {
  supervisor.start({ name: 'group', command: '/bin/sh', args: ['-c', 'sleep 600 & echo "child $!"; wait'], env: { PATH: process.env.PATH } })
  const { child, first, second } = await killAndRestart('group')
  assert.equal(await isRunning(child), false, `the child ${child} of the killed process ${first} still runs beside its successor ${second}`)
})

test('what it left in a session of its own, working in its directory, is gone too (PostgreSQL\'s backends)', async () => {
  supervisor.start({
    name: 'sessions',
    command: '/bin/sh',
    // The sleep calls setsid() before it runs: a session, and so a process group, of its own.
    args: ['-c', `cd ${workDir}; setsid sleep 600 & sleep 0.2; echo "child $!"; wait`],
    env: { PATH: process.env.PATH },
    workDir
  })
  const { child, first, second } = await killAndRestart('sessions')
  assert.equal(await isRunning(child), false, `the child ${child} of the killed process ${first} still runs beside its successor ${second}`)
})

async function log (name: string): Promise<string> {
  return await readFile(join(dir, `${name}.log`), 'utf8').catch(() => '')
}

/** The child the process `parent` named, from the log lines it wrote after it started. */
function childPid (text: string, parent: number): number | null {
  const after = text.slice(text.indexOf(`started (pid ${parent})`))
  const match = /child (\d+)/.exec(after)
  return match === null ? null : Number(match[1])
}
