/**
 * host-agent/process/proc.ts: what the agent learns of processes from /proc, on processes this
 * test starts (and ends) itself.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { after, describe, it } from 'node:test'
import { findProcesses, isRunning, startTimeOf } from '../../../host-agent/process/proc.js'
import { waitFor } from '../../../stack/wait.js'

describe('/proc', () => {
  const children: Array<ReturnType<typeof spawn>> = []
  after(() => { for (const child of children) child.kill('SIGKILL') })

  /** A `sleep 60` whose command line starts with `name` (its argv[0]). */
  async function sleeper (name = 'sleep'): Promise<number> {
    const child = spawn('sleep', ['60'], { argv0: name, stdio: 'ignore' })
    children.push(child)
    await once(child, 'spawn')
    return child.pid!
  }

  it('finds a process by its whole command line, one longer than the scan\'s first buffer included', async () => {
    const marker = `--proc-test-${process.pid}-${Date.now()}`
    const long = `${marker}-${'x'.repeat(10_000)}`
    const shortPid = await sleeper(marker)
    const longPid = await sleeper(long)
    // 'spawn' comes after the fork, maybe before the exec: the command line is sleep's soon after.
    const found = await waitFor('both sleepers in /proc', async () => {
      const processes = await findProcesses((argv) => argv[0]?.startsWith(marker) === true)
      return processes.length === 2 ? processes : null
    }, { timeoutMs: 5000, intervalMs: 20 })
    assert.deepEqual(found.map((p) => p.pid).sort(), [shortPid, longPid].sort())
    assert.deepEqual(found.find((p) => p.pid === longPid)?.argv, [long, '60'])
    assert.deepEqual(found.find((p) => p.pid === shortPid)?.argv, [marker, '60'])
    for (const p of found) assert.equal(p.startTime, startTimeOf(p.pid))
  })

  it('names a process by PID and start time: an ended one no longer runs', async () => {
    const pid = await sleeper()
    const identity = { pid, startTime: startTimeOf(pid)! }
    assert.ok(isRunning(identity))
    const child = children.find((c) => c.pid === pid)!
    child.kill('SIGKILL')
    await once(child, 'exit')
    assert.equal(isRunning(identity), false)
  })
})
