/**
 * The dev stack from start to stop, as `npm start` runs it: ready with every component, its
 * state kept in the data directory, VMs outliving it, an ordered stop, a restart that finds
 * everything as it was. Its hosts keep leases, as hosts with watchdogs do: a stop must end each
 * host's watchdog with its agent, or the watchdog, no longer petted, would fence the VMs left
 * running for the next start.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { findVmmProcesses, isRunning } from '../../stack/processes.js'
import { waitFor } from '../../stack/wait.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const COMPONENTS = ['postgres', 'temporal', 'worker', 'watchdog-host-1', 'agent-host-1', 'watchdog-host-2', 'agent-host-2', 'api']

describe('the dev stack', { timeout: 600_000 }, () => {
  let stack: TestStack
  let instanceId: string
  let vmmPid: number

  before(async () => {
    stack = await startStack({ env: { VMPLANE_HOST_LEASES: '1' } })
  })
  after(async () => {
    await stack?.stop()
  })

  test('reports ready in run/stack.json, with everything there answering', async () => {
    const { info } = stack
    assert.equal(info.hosts.length, 2)
    assert.equal(info.docsUrl, `${info.apiUrl}/docs`)
    assert.equal(info.temporalShape, 'dev', 'the dev server unless VMPLANE_TEMPORAL says otherwise')
    for (const url of [`${info.apiUrl}/readyz`, info.docsUrl, info.temporalUiUrl, ...info.hosts.map((host) => `${host.url}/healthz`)]) {
      const response = await fetch(url)
      assert.equal(response.status, 200, url)
    }
    assert.match(info.databaseUrl, /^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/vmplane$/)
    assert.equal((await api(stack).get('/v1/instances')).status, 200)
    // Readiness says how many hosts can take work: the stack is ready once both have registered.
    assert.deepEqual((await api(stack).get('/readyz')).body, { status: 'ready', activeHosts: 2 })
  })

  test('keeps a PID file for every component, naming its running process', async () => {
    for (const component of COMPONENTS) {
      assert.ok(await isRunning(await stack.pid(component)), component)
    }
  })

  test('keeps its tokens in the data directory, readable by the owner only', async () => {
    for (const [file, token] of [['api-token', stack.info.apiToken], ['viewer-token', stack.info.viewerToken], ['agent-token', stack.info.agentToken]]) {
      const path = join(stack.dataDir, file)
      assert.equal((await readFile(path, 'utf8')).trim(), token)
      assert.equal((await stat(path)).mode & 0o777, 0o600)
    }
  })

  test('gives every simulated host the stand-in boot images of the walk-through', async () => {
    for (const host of stack.info.hosts) {
      for (const image of ['vmlinux', 'initrd.img']) await stat(join(host.imageDir, image))
    }
  })

  test('refuses a second stack on the same data directory', async () => {
    const second = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'stack', 'dev-stack.js')], { env: stack.env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    second.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    const code = await new Promise((resolve) => second.once('exit', resolve))
    assert.equal(code, 1)
    assert.match(output, /another dev stack \(pid \d+\) is running/)
    assert.ok(await isRunning(await stack.pid('api')), 'the first stack still runs')
  })

  test('runs a VM whose VMM process outlives the stack', async () => {
    const created = await api(stack).post('/v1/instances', {
      name: 'outlives-the-stack',
      vcpus: 1,
      memoryMiB: 128,
      boot: { kernel: 'vmlinux', initramfs: 'initrd.img' }
    })
    assert.equal(created.status, 202, JSON.stringify(created.body))
    instanceId = created.body.instance.id
    await waitFor('the instance running', async () => {
      const { body } = await api(stack).get(`/v1/instances/${instanceId}`)
      return body.state === 'running' ? true : null
    }, { timeoutMs: 60_000 })
    const vmms = await findVmmProcesses(stack.dataDir)
    assert.equal(vmms.length, 1)
    vmmPid = vmms[0]

    const pids = await Promise.all(COMPONENTS.map((component) => stack.pid(component)))
    assert.equal(await stack.shutdown(), 0)
    for (const [i, pid] of pids.entries()) assert.equal(await isRunning(pid), false, `${COMPONENTS[i]} stopped`)
    assert.ok(await isRunning(vmmPid), 'the VMM is still running')
    assert.match(stack.tail(), /1 VMM process\(es\) left running/)
  })

  test('stopped clients first, then Temporal, then PostgreSQL, and cleaned up run/', async () => {
    const stoppedAt = async (component: string): Promise<number> => {
      const log = await readFile(join(stack.paths.logDir, `${component}.log`), 'utf8')
      const stops = [...log.matchAll(/^--- (\S+) stopped \(/gm)]
      assert.ok(stops.length > 0, `${component} logged its stop`)
      return Date.parse(stops[stops.length - 1][1])
    }
    const clients = await Promise.all(['api', 'worker', 'watchdog-host-1', 'agent-host-1', 'watchdog-host-2', 'agent-host-2'].map(stoppedAt))
    assert.ok(Math.max(...clients) <= await stoppedAt('temporal'))
    assert.ok(await stoppedAt('temporal') <= await stoppedAt('postgres'))
    await assert.rejects(stat(stack.paths.stackFile), { code: 'ENOENT' })
    for (const component of COMPONENTS) await assert.rejects(stack.pid(component))
  })

  test('starts again on the same data directory and finds everything as it was', async () => {
    const before = stack.info
    stack = await stack.restart()
    assert.equal(stack.info.apiUrl, before.apiUrl)
    assert.equal(stack.info.apiToken, before.apiToken)
    assert.equal(stack.info.agentToken, before.agentToken)
    assert.equal(stack.info.databaseUrl, before.databaseUrl)
    const { status, body } = await api(stack).get(`/v1/instances/${instanceId}`)
    assert.equal(status, 200)
    assert.equal(body.state, 'running')
    assert.deepEqual(await findVmmProcesses(stack.dataDir), [vmmPid], 'the same VMM process, re-adopted')
  })
})
