/**
 * The supervisor cleans up after a component's process ends, as a service manager does: what
 * the process started and left behind in its process group (PostgreSQL's backends, once its
 * postmaster is killed) is killed before the component is started again. A restart beside them
 * failed: PostgreSQL refused to start while its dead predecessor's backends still held its
 * shared memory ("pre-existing shared memory block is still in use"), and a crash campaign on
 * the cluster shape counted an ending nobody caused.
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
let supervisor: Supervisor

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vmp-supervisor-'))
  supervisor = new Supervisor(dir, new StackOutput(dir, false), 10_000)
})
after(async () => {
  await supervisor.killAll()
  await rm(dir, { recursive: true, force: true })
})

test('what a killed component left in its process group is gone before the component starts again', async () => {
  // A shell that starts a long-lived child in its own process group and says which it is.
  supervisor.start({
    name: 'parent',
    command: '/bin/sh',
    args: ['-c', 'sleep 600 & echo "child $!"; wait'],
    env: { PATH: process.env.PATH }
  })
  const firstPid = await waitFor('the component running', async () => supervisor.pid('parent'), { timeoutMs: 10_000 })
  const child = await waitFor('the component naming its child', async () => childPid(await log(), firstPid), { timeoutMs: 10_000 })
  assert.ok(await isRunning(child))

  signalProcess(firstPid, 'SIGKILL')
  const secondPid = await waitFor('the component started again', async () => {
    const pid = supervisor.pid('parent')
    return pid !== null && pid !== firstPid ? pid : null
  }, { timeoutMs: 10_000 })

  assert.equal(await isRunning(child), false, `the child ${child} of the killed process ${firstPid} still runs beside its successor ${secondPid}`)
})

async function log (): Promise<string> {
  return await readFile(join(dir, 'parent.log'), 'utf8').catch(() => '')
}

/** The child the process `parent` named, from the log lines it wrote after it started. */
function childPid (text: string, parent: number): number | null {
  const after = text.slice(text.indexOf(`started (pid ${parent})`))
  const match = /child (\d+)/.exec(after)
  return match === null ? null : Number(match[1])
}
