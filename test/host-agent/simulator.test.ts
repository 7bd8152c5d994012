/**
 * The Cloud Hypervisor simulator behaves like the real program where the driver can tell:
 * command line, REST status codes and quirks, the event file, exit codes, and each `sim.*`
 * directive. Every test runs real simulator processes.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { readFile, stat } from 'node:fs/promises'
import { connect } from 'node:net'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { EventStreamParser, readEventFile } from '../../host-agent/cloud-hypervisor/event-monitor.js'
import { waitUntil } from '../../stack/wait.js'
import { rawExchange, runToExit, SimulatedVmm, useWorkspace } from './helpers/simulator.js'

const workspace = useWorkspace('vmp-sim-')
const running: SimulatedVmm[] = []

after(async () => { await Promise.all(running.map((vmm) => vmm.stop())) })

async function startVmm (): Promise<SimulatedVmm> {
  const vmm = await SimulatedVmm.start(await workspace.nextDir())
  running.push(vmm)
  return vmm
}

async function eventNames (vmm: SimulatedVmm): Promise<string[]> {
  return (await readEventFile(vmm.paths.events)).events.map((e) => `${e.source} ${e.event}`)
}

/** A while later, the process still runs and its API still answers. */
async function assertStillServing (vmm: SimulatedVmm): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 200))
  assert.ok(vmm.running)
  assert.equal((await vmm.call('GET', 'vmm.ping')).status, 200)
}

async function waitForEvent (vmm: SimulatedVmm, name: string): Promise<void> {
  await waitUntil(`event ${name}`, async () => (await eventNames(vmm)).includes(name), { timeoutMs: 5000, intervalMs: 20 })
}

describe('command line', () => {
  it('prints help and exits 2 with no arguments, like clap', async () => {
    const result = await runToExit([])
    assert.equal(result.code, 2)
    assert.match(result.stderr, /Usage: cloud-hypervisor \[OPTIONS\]/)
  })

  it('rejects unknown flags, a VM on the command line and missing values with exit 2', async () => {
    for (const args of [['--bogus'], ['--kernel', '/vmlinux'], ['--api-socket'], ['--log-file', 'a', '--log-file', 'b']]) {
      const result = await runToExit(args)
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`)
      assert.match(result.stderr, /^error: /)
    }
  })

  it('prints its version with -V', async () => {
    const result = await runToExit(['-V'])
    assert.equal(result.code, 0)
    assert.match(result.stdout, /^cloud-hypervisor v\d+\.\d+\.\d+/)
  })

  it('fails start-up with exit 1 on a malformed --api-socket or --event-monitor', async () => {
    assert.equal((await runToExit(['--api-socket', 'path=/tmp/x,fd=3'])).code, 1)
    assert.equal((await runToExit(['--event-monitor', '/tmp/no-path-key'])).code, 1)
  })

  it('refuses a socket held by a live VMM (exit 1) and replaces a stale one', async () => {
    const vmm = await startVmm()
    const second = await runToExit(['--api-socket', `path=${vmm.paths.apiSocket}`])
    assert.equal(second.code, 1)
    assert.match(second.stderr, /API socket in use/)
    await vmm.stop()
    assert.ok(await stat(vmm.paths.apiSocket), 'a killed VMM leaves its socket behind')
    const restarted = await SimulatedVmm.start(vmm.paths.dir)
    running.push(restarted)
    assert.equal((await restarted.call('GET', 'vmm.ping')).status, 200)
  })

  it('creates its files for the owner only (umask 077)', async () => {
    const vmm = await startVmm()
    assert.equal((await stat(vmm.paths.events)).mode & 0o777, 0o600)
    assert.equal((await stat(vmm.paths.apiSocket)).mode & 0o077, 0)
  })
})

describe('REST API', () => {
  it('answers vmm.ping with 200 and its pid', async () => {
    const vmm = await startVmm()
    const { status, json } = await vmm.callJson('GET', 'vmm.ping')
    assert.equal(status, 200)
    assert.equal((json as { pid: number }).pid, vmm.pid)
  })

  it('uses the real status codes and JSON-array error chains through a VM lifecycle', async () => {
    const vmm = await startVmm()
    const expect = async (method: string, endpoint: string, status: number, body?: unknown): Promise<unknown> => {
      const response = await vmm.callJson(method, endpoint, body)
      assert.equal(response.status, status, `${method} ${endpoint}: ${JSON.stringify(response.json)}`)
      return response.json
    }
    assert.deepEqual(await expect('GET', 'vm.info', 404), ['Error from API', 'The VM info is not available', 'VM is not created'])
    assert.deepEqual(await expect('PUT', 'vm.boot', 404), ['Error from API', 'The VM could not boot', 'VM config is missing'])
    assert.deepEqual(await expect('PUT', 'vm.shutdown', 500), ['Error from API', 'The VM could not shutdown', 'VM is not running'])
    assert.deepEqual(await expect('PUT', 'vm.power-button', 500), ['Error from API', 'Error triggering power button', 'VM is not running'])
    assert.deepEqual(await expect('PUT', 'vm.reboot', 404), ['Error from API', 'The VM could not reboot', 'VM is not created'])
    const config = { payload: { kernel: workspace.kernel }, console: { mode: 'Off' } }
    assert.equal(await expect('PUT', 'vm.create', 204, config), undefined)
    assert.deepEqual(await expect('PUT', 'vm.create', 500, config), ['Error from API', 'The VM could not be created', 'VM is already created'])
    assert.equal((await expect('GET', 'vm.info', 200) as { state: string }).state, 'Created')
    await expect('PUT', 'vm.boot', 204)
    assert.deepEqual(await expect('PUT', 'vm.boot', 500), ['Error from API', 'The VM could not boot', 'VM is already created'])
    const info = await expect('GET', 'vm.info', 200) as { state: string, config: { memory: { size: number } } }
    assert.equal(info.state, 'Running')
    assert.equal(info.config.memory.size, 512 * 1024 * 1024, 'defaults are filled in')
    await expect('PUT', 'vm.shutdown', 204)
    assert.equal((await expect('GET', 'vm.info', 200) as { state: string }).state, 'Created', 'a shut-down VM reads Created')
    await expect('PUT', 'vm.boot', 204)
    await expect('PUT', 'vm.delete', 204)
    await expect('GET', 'vm.info', 404)
    await expect('PUT', 'vm.delete', 204)
  })

  it('refuses bodies on body-less endpoints, the wrong method, unknown paths and query strings', async () => {
    const vmm = await startVmm()
    assert.deepEqual(await vmm.call('PUT', 'vm.boot', '{}'), { status: 400, body: '["Bad Request"]' })
    assert.deepEqual(await vmm.call('GET', 'vm.boot'), { status: 400, body: '["Bad Request"]' })
    assert.deepEqual(await vmm.call('PUT', 'vm.info'), { status: 400, body: '["Bad Request"]' })
    assert.deepEqual(await vmm.call('GET', 'vm.nonsense'), { status: 404, body: '["Not Found"]' })
    assert.deepEqual(await vmm.call('GET', 'vmm.ping?x=1'), { status: 404, body: '["Not Found"]' })
  })

  it('answers a vm.create without body 400 and with bad JSON 400 with the serde chain', async () => {
    const vmm = await startVmm()
    assert.deepEqual(await vmm.call('PUT', 'vm.create'), { status: 400, body: '' })
    const bad = await vmm.callJson('PUT', 'vm.create', { payload: { kernel: workspace.kernel }, console: { mode: 'off' } })
    assert.equal(bad.status, 400)
    assert.equal((bad.json as string[])[0], 'Failed to deserialize JSON')
    assert.match((bad.json as string[])[1]!, /unknown variant `off`/)
  })

  it('reads a body only through Content-Length: a chunked body counts as none', async () => {
    const vmm = await startVmm()
    const body = JSON.stringify({ payload: { kernel: workspace.kernel } })
    const chunked = `PUT /api/v1/vm.create HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    const answer = await rawExchange(vmm.paths.apiSocket, chunked)
    assert.match(answer, /^HTTP\/1\.1 400 \r\n/)
    assert.equal((await vmm.call('GET', 'vm.info')).status, 404, 'no VM was created')
  })

  it('answers with the headers of micro_http', async () => {
    const vmm = await startVmm()
    const answer = await rawExchange(vmm.paths.apiSocket, 'GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\n\r\n', 200)
    assert.match(answer, /^HTTP\/1\.1 200 \r\nServer: Cloud Hypervisor API\r\nConnection: keep-alive\r\nContent-Type: application\/json\r\nContent-Length: \d+\r\n\r\n\{/)
  })

  it('keeps at most 10 connections: the 11th gets the canned 503 and is closed', async () => {
    const vmm = await startVmm()
    const canned = 'HTTP/1.1 503\r\nServer: Cloud Hypervisor API\r\nConnection: close\r\nContent-Length: 40\r\n\r\n{ "error": "Too many open connections" }'
    // Connections are opened one by one until one is refused; the server must then hold exactly
    // ten. A connection of startVmm's pings that the server has not yet seen close still counts
    // for a moment (its 503 comes with fewer than ten held): opening goes on until it is gone.
    const held: Array<{ socket: ReturnType<typeof connect>, closed: boolean }> = []
    try {
      let refusedWith = -1
      await waitUntil('a connection refused with the canned 503 while ten are held', async () => {
        const socket = connect(vmm.paths.apiSocket)
        const entry = { socket, closed: false }
        let received = ''
        socket.setEncoding('utf8').on('data', (chunk: string) => { received += chunk })
        socket.on('close', () => { entry.closed = true })
        socket.on('error', () => {})
        await once(socket, 'connect')
        await Promise.race([once(socket, 'close'), sleep(100)])
        if (!entry.closed) {
          held.push(entry)
          return false
        }
        assert.equal(received, canned)
        refusedWith = held.filter((h) => !h.closed).length
        return refusedWith === 10
      }, { timeoutMs: 10_000, intervalMs: 0, detail: () => `refused while ${refusedWith} were held` })
    } finally {
      for (const { socket } of held) socket.destroy()
    }
    await waitUntil('a connection slot free again', async () => (await vmm.call('GET', 'vmm.ping')).status === 200, { timeoutMs: 2000, intervalMs: 20 })
  })

  it('handles one request at a time: a ping waits for a slow boot', async () => {
    const vmm = await startVmm()
    await vmm.call('PUT', 'vm.create', JSON.stringify({ payload: { kernel: workspace.kernel, cmdline: 'sim.boot_ms=400' } }))
    const finished: string[] = []
    const boot = vmm.call('PUT', 'vm.boot').then((r) => { finished.push('boot'); return r })
    await waitForEvent(vmm, 'vm booting')
    const ping = vmm.call('GET', 'vmm.ping').then((r) => { finished.push('ping'); return r })
    assert.equal((await Promise.all([boot, ping]))[1].status, 200)
    assert.deepEqual(finished, ['boot', 'ping'])
  })

  it('fails vm.boot like the real program when the kernel cannot be opened', async () => {
    const vmm = await startVmm()
    await vmm.callJson('PUT', 'vm.create', { payload: { kernel: join(workspace.dir, 'missing-vmlinux') } })
    const { status, json } = await vmm.callJson('PUT', 'vm.boot')
    assert.equal(status, 500)
    assert.deepEqual(json, ['Error from API', 'The VM could not boot', 'Cannot open kernel file', 'No such file or directory (os error 2)'])
    assert.ok((await eventNames(vmm)).includes('vm booting'), 'booting is emitted even when the boot fails')
  })
})

describe('event file and exits', () => {
  it('writes pretty-printed JSON events separated by blank lines, starting with vmm starting', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel)
    await waitForEvent(vmm, 'virtio-device activated')
    const text = await readFile(vmm.paths.events, 'utf8')
    const chunks = text.split('\n\n').filter((chunk) => chunk !== '')
    assert.ok(text.endsWith('}\n\n'))
    const first = JSON.parse(chunks[0]!)
    assert.deepEqual(Object.keys(first), ['timestamp', 'source', 'event', 'properties'])
    assert.deepEqual(Object.keys(first.timestamp), ['secs', 'nanos'])
    assert.equal(chunks[0], JSON.stringify(first, null, 2), 'two-space pretty printing, like serde_json')
    assert.deepEqual(await eventNames(vmm), ['vmm starting', 'vm booting', 'vm booted', 'virtio-device activated'])
  })

  it('pauses and resumes the VM as Vm::pause and Vm::resume do: events first, then the state check', async () => {
    const vmm = await startVmm()
    const expect = async (path: string, status: number): Promise<unknown> => {
      const answer = await vmm.call('PUT', path)
      assert.equal(answer.status, status, `${path}: ${answer.body}`)
      return answer.body === '' ? undefined : JSON.parse(answer.body)
    }
    assert.deepEqual(await expect('vm.pause', 500), ['Error from API', 'The VM could not be paused', 'VM is not running'])
    await vmm.boot(workspace.kernel)
    await expect('vm.pause', 204)
    assert.equal((JSON.parse((await vmm.call('GET', 'vm.info')).body) as { state: string }).state, 'Paused')
    assert.deepEqual(await expect('vm.pause', 500), ['Error from API', 'The VM could not be paused', 'Cannot pause VM',
      'Failed to pause migratable component', 'Invalid transition: InvalidStateTransition(Paused, Paused)'])
    await expect('vm.resume', 204)
    assert.deepEqual(await expect('vm.resume', 500), ['Error from API', 'The VM could not resume', 'Cannot resume VM',
      'Failed to resume migratable component', 'Invalid transition: InvalidStateTransition(Running, Running)'])
    assert.deepEqual((await eventNames(vmm)).filter((e) => /pausing|paused|resuming|resumed/.test(e)).slice(-6),
      ['vm pausing', 'vm paused', 'vm pausing', 'vm resuming', 'vm resumed', 'vm resuming'])
  })

  it('exits 0 after the guest powers off on the power button, with the shutdown events, and removes its socket', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.shutdown_ms=20')
    assert.equal((await vmm.call('PUT', 'vm.power-button')).status, 204)
    assert.deepEqual(await vmm.exit, { code: 0, signal: null })
    assert.deepEqual((await eventNames(vmm)).slice(-3), ['vm shutdown', 'vm deleted', 'vmm shutdown'])
    await assert.rejects(stat(vmm.paths.apiSocket))
  })

  it('answers vmm.shutdown with 200 and an empty body, then exits 0', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel)
    assert.deepEqual(await vmm.call('PUT', 'vmm.shutdown'), { status: 200, body: '' })
    assert.deepEqual(await vmm.exit, { code: 0, signal: null })
    assert.deepEqual((await eventNames(vmm)).slice(-3), ['vm shutdown', 'vm deleted', 'vmm shutdown'])
  })

  it('exits 0 on SIGTERM and SIGINT through the same path', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const vmm = await startVmm()
      await vmm.boot(workspace.kernel)
      vmm.signal(signal)
      assert.deepEqual(await vmm.exit, { code: 0, signal: null })
      assert.equal((await eventNames(vmm)).at(-1), 'vmm shutdown')
    }
  })

  it('reboots inside the same process', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel)
    assert.equal((await vmm.call('PUT', 'vm.reboot')).status, 204)
    const { json } = await vmm.callJson('GET', 'vmm.ping')
    assert.equal((json as { pid: number }).pid, vmm.pid)
    assert.ok(vmm.running)
    const names = await eventNames(vmm)
    assert.ok(names.indexOf('vm rebooting') < names.indexOf('vm rebooted'))
  })
})

describe('sim.* directives', () => {
  it('sim.boot_ms=never: vm.boot never returns, the API is wedged, SIGTERM hangs, SIGKILL works', async () => {
    const vmm = await startVmm()
    await vmm.call('PUT', 'vm.create', JSON.stringify({ payload: { kernel: workspace.kernel, cmdline: 'sim.boot_ms=never' } }))
    vmm.call('PUT', 'vm.boot').catch(() => {})
    await waitForEvent(vmm, 'vm booting')
    assert.ok(await vmm.pingUnanswered())
    vmm.signal('SIGTERM')
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.ok(vmm.running, 'a VMM wedged in boot does not exit on SIGTERM')
    assert.deepEqual(await vmm.stop(), { code: null, signal: 'SIGKILL' })
  })

  it('sim.ignore_power_button: the guest keeps running after a press', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.ignore_power_button sim.shutdown_ms=10')
    assert.equal((await vmm.call('PUT', 'vm.power-button')).status, 204)
    await assertStillServing(vmm)
  })

  it('sim.poweroff_ms: the guest powers itself off and the process exits 0', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.poweroff_ms=50')
    assert.deepEqual(await vmm.exit, { code: 0, signal: null })
    assert.equal((await eventNames(vmm)).at(-1), 'vmm shutdown')
  })

  it('sim.crash_after_ms with sim.exit_code or sim.crash_signal: the process dies that way, without shutdown events', async () => {
    const coded = await startVmm()
    await coded.boot(workspace.kernel, 'sim.crash_after_ms=20 sim.exit_code=3')
    assert.deepEqual(await coded.exit, { code: 3, signal: null })
    const signalled = await startVmm()
    await signalled.boot(workspace.kernel, 'sim.crash_after_ms=20 sim.crash_signal=SEGV')
    assert.deepEqual(await signalled.exit, { code: null, signal: 'SIGSEGV' })
    assert.ok(!(await eventNames(signalled)).includes('vmm shutdown'))
    await stat(signalled.paths.apiSocket)
  })

  it('sim.hang_api_after_ms: the API stops answering while the process and guest live on', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.hang_api_after_ms=50')
    await new Promise((resolve) => setTimeout(resolve, 150))
    assert.ok(await vmm.pingUnanswered())
    assert.ok(vmm.running)
    vmm.signal('SIGTERM')
    assert.deepEqual(await vmm.exit, { code: 0, signal: null }, 'the VMM thread itself is not wedged')
  })

  it('sim.ignore_sigterm: SIGTERM does nothing', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.ignore_sigterm')
    vmm.signal('SIGTERM')
    await assertStillServing(vmm)
  })

  it('sim.reboot_ms=never: vm.reboot never returns', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.reboot_ms=never')
    vmm.call('PUT', 'vm.reboot').catch(() => {})
    await waitForEvent(vmm, 'vm rebooting')
    assert.ok(await vmm.pingUnanswered())
  })

  it('sim.guest_reboot_ms: the guest reboots itself once, in the same process', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.guest_reboot_ms=30')
    await waitForEvent(vmm, 'vm rebooted')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal((await eventNames(vmm)).filter((name) => name === 'vm rebooted').length, 1)
    assert.ok(vmm.running)
  })

  it('sim.garbage_events: a non-JSON chunk lands in the event file; the events around it still parse', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.garbage_events')
    await waitForEvent(vmm, 'virtio-device activated')
    const parsed = new EventStreamParser().push(await readFile(vmm.paths.events, 'utf8'))
    assert.ok(parsed.garbage.length > 0)
    assert.ok(parsed.events.some((e) => e.event === 'booted'))
  })

  it('sim.kernel_load_error: vm.boot fails with the kernel-load chain', async () => {
    const vmm = await startVmm()
    await vmm.callJson('PUT', 'vm.create', { payload: { kernel: workspace.kernel, cmdline: 'sim.kernel_load_error' } })
    const { status, json } = await vmm.callJson('PUT', 'vm.boot')
    assert.equal(status, 500)
    assert.deepEqual(json, ['Error from API', 'The VM could not boot', 'Cannot load the kernel into memory', 'Invalid ELF magic number'])
  })

  it('logs a directive it does not understand and boots anyway', async () => {
    const vmm = await startVmm()
    await vmm.boot(workspace.kernel, 'sim.no_such_thing=1')
    assert.match(await readFile(vmm.paths.log, 'utf8'), /ignoring unknown or malformed directive "sim.no_such_thing=1"/)
  })
})
