/**
 * A dev stack killed before it could tear down (SIGKILL, a power cut, an OOM kill: every process
 * of it gone at once) leaves its network behind for good: its LAN's and hosts' network namespaces,
 * with their TAPs, and its nftables table. The next dev stack that starts, on any data directory,
 * removes what stacks that are gone left, and nothing of a stack still running.
 */
import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { runCommand } from '../../host-agent/process/command.js'
import { listNamespaces, stackPrefix } from '../../stack/host-network.js'
import { readPidFiles } from '../../stack/pid-files.js'
import { signalProcess, waitForExit } from '../../stack/processes.js'
import { startStack, type TestStack } from '../helpers/stack.js'

/** The stack's namespaces: `vmp-<hash>-lan`, `vmp-<hash>-host-1`, … */
async function namespacesOf (stack: TestStack): Promise<string[]> {
  return (await listNamespaces()).filter((netns) => netns.startsWith(stackPrefix(stack.dataDir))).sort()
}

/** The stack's nftables table, `ip vmp-<hash>`, if there is one. */
async function tablesOf (stack: TestStack): Promise<string[]> {
  const table = `table ip ${stackPrefix(stack.dataDir).slice(0, -1)}`
  return (await runCommand('nft', ['list', 'tables'])).split('\n').filter((line) => line.trim() === table)
}

/** Every process of the stack at once, the stack's own first so that it restarts none of them. */
async function killWholeStack (stack: TestStack): Promise<void> {
  process.kill(stack.stackPid, 'SIGKILL')
  assert.ok(await waitForExit(stack.stackPid, 10_000), 'the dev stack outlived SIGKILL')
  const components = [...(await readPidFiles(stack.paths.runDir)).values()].filter((pid) => pid !== stack.stackPid)
  for (const pid of components) signalProcess(pid, 'SIGKILL')
  for (const pid of components) assert.ok(await waitForExit(pid, 10_000), `process ${pid} outlived SIGKILL`)
}

describe('a dev stack killed before its teardown', { timeout: 600_000 }, () => {
  const stacks: TestStack[] = []
  after(async () => {
    for (const stack of stacks) await stack.stop()
  })

  test("leaves nothing of its network once another stack starts, which keeps a running stack's", async () => {
    const running = await startStack({ hosts: 1 })
    stacks.push(running)
    const killed = await startStack({ hosts: 1 })
    stacks.push(killed)
    const runningNetwork = await namespacesOf(running)
    assert.equal(runningNetwork.length, 2, 'a LAN and a host')
    assert.equal((await namespacesOf(killed)).length, 2, 'a LAN and a host')
    assert.equal((await tablesOf(killed)).length, 1)

    await killWholeStack(killed)
    const next = await startStack({ hosts: 1 })
    stacks.push(next)

    assert.deepEqual(await namespacesOf(killed), [], "the killed stack's namespaces are gone")
    assert.deepEqual(await tablesOf(killed), [], "the killed stack's nftables table is gone")
    assert.deepEqual(await namespacesOf(running), runningNetwork, "the running stack's network is left alone")
    assert.equal((await tablesOf(running)).length, 1)
    assert.equal((await fetch(`${running.apiUrl}/readyz`)).status, 200)
  })
})
