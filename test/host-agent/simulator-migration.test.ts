/**
 * Live migration in the simulator (docs/simulator.md, "Migration"), between real simulator
 * processes: vm.send-migration on a booted source, vm.receive-migration on an empty target, over
 * a Unix socket and over TCP on loopback, and the faults the sim.migration_* directives make.
 * Each VMM runs in its own directory, as the agent runs it, so the serial socket's relative path
 * lands in a different place on each side. The guest's network moves too: between two hosts'
 * network namespaces on one LAN, it answers on the target, which announces its MAC.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { open, readFile, stat, truncate, writeFile } from 'node:fs/promises'
import { connect, createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { macOf } from '../../domain/interfaces.js'
import { VNI_RANGE } from '../../domain/network-segments.js'
import { readEventFile, type VmmEvent } from '../../host-agent/cloud-hypervisor/event-monitor.js'
import { vmmCommandPrefix } from '../../host-agent/cloud-hypervisor/launch.js'
import { TapDevices } from '../../host-agent/network/taps.js'
import { runCommand } from '../../host-agent/process/command.js'
import { buildSeed } from '../../host-agent/storage/cloud-init-seed.js'
import { createHostNetwork, type HostNetwork } from '../../stack/host-network.js'
import { waitFor, waitUntil } from '../../stack/wait.js'
import { ping, tcpEcho } from '../helpers/net-probe.js'
import { SimulatedVmm, useWorkspace } from './helpers/simulator.js'

const workspace = useWorkspace('vmp-simmig-')
const running: SimulatedVmm[] = []
const networks: HostNetwork[] = []

after(async () => {
  await Promise.all(running.map((vmm) => vmm.stop()))
  for (const network of networks) await network.remove()
})

const MIB = 1024 * 1024
const MIGRATING = 'VM is currently migrating and can\'t be modified'
const ABORTED = ['Error from API', 'Error receiving migration', 'Failed to complete migration for migratable component', 'Migration was aborted']
/** The serial socket, relative: each VMM binds it in its own working directory. */
const CONSOLE = 'con.sock'

type Answer = { status: number, json: unknown }

/**
 * The receiver's answer when its sender went away: the end of the stream, a reset if the sender
 * died with the receiver's last answer unread, or a broken pipe if it died before the receiver
 * wrote that answer.
 */
function assertSenderGone (answer: Answer): void {
  assert.equal(answer.status, 500, JSON.stringify(answer.json))
  const chain = answer.json as string[]
  assert.deepEqual(chain.slice(0, 3), ['Error from API', 'Error receiving migration', 'Socket error'])
  const socketErrors = ['failed to fill whole buffer', 'Connection reset by peer (os error 104)', 'Broken pipe (os error 32)']
  assert.ok(socketErrors.includes(chain[3]!), chain[3])
}

/** A VMM in its own directory; `prefix` runs it as the agent does in a host's namespace (vmmCommandPrefix). */
async function startVmm (prefix: readonly string[] = []): Promise<SimulatedVmm> {
  const vmm = await SimulatedVmm.start(await workspace.nextDir(), prefix)
  running.push(vmm)
  return vmm
}

async function events (vmm: SimulatedVmm): Promise<VmmEvent[]> {
  return (await readEventFile(vmm.paths.events)).events
}

async function eventNames (vmm: SimulatedVmm): Promise<string[]> {
  return (await events(vmm)).map((e) => `${e.source} ${e.event}`)
}

/** The events from `first` on, with each memory iteration's id. */
async function eventsFrom (vmm: SimulatedVmm, first: string): Promise<string[]> {
  const names = (await events(vmm)).map((e) => `${e.source} ${e.event}${e.properties?.id === undefined ? '' : ` ${e.properties.id}`}`)
  return names.slice(names.indexOf(first))
}

async function waitForEvent (vmm: SimulatedVmm, name: string, timeoutMs = 5000): Promise<void> {
  await waitUntil(`event ${name}`, async () => (await eventNames(vmm)).includes(name), { timeoutMs, intervalMs: 10 })
}

async function makeDisk (name: string): Promise<string> {
  const path = join(workspace.dir, name)
  await writeFile(path, '')
  await truncate(path, 16 * MIB)
  return path
}

function vmConfig (options: { disks?: string[], seed?: string, cmdline?: string, memory?: Record<string, unknown> }): Record<string, unknown> {
  return {
    payload: { kernel: workspace.kernel, cmdline: `console=ttyS0 ${options.cmdline ?? ''}`.trim() },
    cpus: { boot_vcpus: 1, max_vcpus: 1 },
    memory: { size: 128 * MIB, ...options.memory },
    serial: { mode: 'Socket', socket: CONSOLE },
    console: { mode: 'Off' },
    disks: [
      ...(options.disks ?? []).map((path) => ({ path, image_type: 'Raw' })),
      ...(options.seed === undefined ? [] : [{ path: options.seed, image_type: 'Raw', readonly: true }])
    ]
  }
}

async function bootSource (config: Record<string, unknown>, prefix: readonly string[] = []): Promise<SimulatedVmm> {
  const vmm = await startVmm(prefix)
  const created = await vmm.callJson('PUT', 'vm.create', config)
  assert.equal(created.status, 204, JSON.stringify(created.json))
  const booted = await vmm.callJson('PUT', 'vm.boot')
  assert.equal(booted.status, 204, JSON.stringify(booted.json))
  return vmm
}

/** Starts vm.receive-migration (it answers only when the migration ends) and waits until the target listens. */
async function receive (target: SimulatedVmm, url: string): Promise<{ answer: Promise<Answer> }> {
  const answer = target.callJson('PUT', 'vm.receive-migration', { receiver_url: url })
  answer.catch(() => {})
  await waitForEvent(target, 'vm migration-receive-ready')
  return { answer }
}

async function send (source: SimulatedVmm, data: Record<string, unknown>): Promise<Answer> {
  return await source.callJson('PUT', 'vm.send-migration', data)
}

/** A source, an empty target listening on a Unix socket in its directory, and the URL. */
async function pair (config: Record<string, unknown>): Promise<{ source: SimulatedVmm, target: SimulatedVmm, url: string, answer: Promise<Answer> }> {
  const source = await bootSource(config)
  const target = await startVmm()
  const url = `unix:${join(target.paths.dir, 'mig.sock')}`
  return { source, target, url, ...await receive(target, url) }
}

async function state (vmm: SimulatedVmm): Promise<string | number> {
  const info = await vmm.callJson('GET', 'vm.info')
  return info.status === 200 ? (info.json as { state: string }).state : info.status
}

/** Whether another VMM fails to boot a VM on `disk` because its lock is held. */
async function lockedElsewhere (disk: string): Promise<boolean> {
  const probe = await startVmm()
  await probe.callJson('PUT', 'vm.create', { payload: { kernel: workspace.kernel }, console: { mode: 'Off' }, disks: [{ path: disk, image_type: 'Raw' }] })
  const booted = await probe.callJson('PUT', 'vm.boot')
  await probe.stop()
  if (booted.status === 204) return false
  assert.equal((booted.json as string[])[3], 'Cannot lock images of all block devices', JSON.stringify(booted.json))
  return true
}

/** Types a line on the VMM's serial console and returns what comes back up to the next prompt. */
async function typeOnConsole (vmm: SimulatedVmm, line: string): Promise<string> {
  const socket = connect(join(vmm.paths.dir, CONSOLE))
  let output = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  try {
    await once(socket, 'connect')
    socket.write(`${line}\r`)
    return await waitFor('the echo and a prompt', async () => output.includes(`${line}\r\n`) && output.endsWith('login: ') ? output : null,
      { timeoutMs: 3000, intervalMs: 20 })
  } finally {
    socket.destroy()
  }
}

async function freeTcpPort (): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  server.close()
  await once(server, 'close')
  return port
}

/** The events of a successful migration, from migration-started on (iterations elided to their ids in order). */
function assertSentEvents (names: string[]): void {
  const iterations = names.filter((name) => name.startsWith('vm migration-memory-iteration'))
  assert.ok(iterations.length >= 1, names.join(', '))
  assert.deepEqual(iterations, iterations.map((_, i) => `vm migration-memory-iteration ${i}`))
  assert.deepEqual(names.filter((name) => !iterations.includes(name)),
    ['vm migration-started', 'vm pausing', 'vm paused', 'vm migration-finished', 'vm deleted', 'vmm shutdown'])
}

const RECEIVED_EVENTS = ['vmm starting', 'vm migration-receive-ready', 'vm migration-receive-started', 'vm restoring',
  'vm restored', 'vm resuming', 'vm resumed', 'vm migration-receive-finished']

describe('a successful migration', () => {
  it('moves a running VM over a Unix socket: the source exits 0, the target runs it with its disks locked and its console where its config says', async () => {
    const disk = await makeDisk('unix.raw')
    const seed = join(workspace.dir, 'unix-seed.img')
    await buildSeed(seed, 'i-migrating', { hostname: 'mig-guest', sshKeys: [] }, [])
    const config = vmConfig({ disks: [disk], seed, cmdline: 'sim.mark_disk=0' })
    const { source, target, url, answer } = await pair(config)
    const sourceInfo = await source.callJson('GET', 'vm.info')

    assert.deepEqual(await send(source, { destination_url: url }), { status: 204, json: undefined })
    assert.deepEqual(await answer, { status: 204, json: undefined })
    assert.deepEqual(await source.exit, { code: 0, signal: null })
    await assert.rejects(stat(source.paths.apiSocket), 'the source removed its API socket')
    await assert.rejects(stat(join(source.paths.dir, CONSOLE)), 'and its serial socket')
    assertSentEvents(await eventsFrom(source, 'vm migration-started'))
    assert.deepEqual(await eventNames(target), RECEIVED_EVENTS, 'no boot on the target')
    assert.equal((await stat(join(target.paths.dir, 'mig.sock'))).isSocket(), true, 'the listener\'s socket stays, as the real program leaves it')
    assert.match(await readFile(source.paths.log, 'utf8'), /INFO:vmm\/src\/lib\.rs -- Migration completed after \d+\.\ds with a downtime of \d+ms \(goal was 300ms\)\n/)

    const targetInfo = await target.callJson('GET', 'vm.info')
    assert.equal((targetInfo.json as { state: string }).state, 'Running')
    assert.deepEqual((targetInfo.json as { config: unknown }).config, (sourceInfo.json as { config: unknown }).config)
    assert.ok(await lockedElsewhere(disk), 'the target holds the disk lock')
    assert.equal((await stat(join(target.paths.dir, CONSOLE))).isSocket(), true, 'the serial socket is bound in the target\'s directory')
    assert.equal(await typeOnConsole(target, 'ls'), 'ls\r\nmig-guest login: ', 'the guest carries on: no boot log, the same hostname')
    const sector = Buffer.alloc(512)
    const handle = await open(disk)
    await handle.read(sector, 0, 512, 0)
    await handle.close()
    assert.match(sector.toString(), /^vmplane-marker boots=1\0/, 'the boot counter did not move: the guest was not rebooted')
    assert.ok(!(await readFile(target.paths.log, 'utf8')).includes('vmplane-marker'))
  })

  it('moves a running VM over TCP on loopback', async () => {
    const disk = await makeDisk('tcp.raw')
    const source = await bootSource(vmConfig({ disks: [disk] }))
    const target = await startVmm()
    const url = `tcp:127.0.0.1:${await freeTcpPort()}`
    const { answer } = await receive(target, url)
    assert.equal((await send(source, { destination_url: url })).status, 204)
    assert.deepEqual(await answer, { status: 204, json: undefined })
    assert.deepEqual(await source.exit, { code: 0, signal: null })
    assertSentEvents(await eventsFrom(source, 'vm migration-started'))
    assert.deepEqual(await eventNames(target), RECEIVED_EVENTS)
    assert.equal(await state(target), 'Running')
    assert.ok(await lockedElsewhere(disk))
  })

  it('sends no memory in a local migration, which needs shared memory', async () => {
    const { source, target, url, answer } = await pair(vmConfig({ memory: { shared: true } }))
    assert.equal((await send(source, { destination_url: url, local: true })).status, 204)
    assert.equal((await answer).status, 204)
    assert.deepEqual(await source.exit, { code: 0, signal: null })
    assert.deepEqual(await eventsFrom(source, 'vm migration-started'),
      ['vm migration-started', 'vm pausing', 'vm paused', 'vm migration-finished', 'vm deleted', 'vmm shutdown'])
    assert.equal(await state(target), 'Running')
  })

  it('carries the guest\'s clock: a power-off due 1 s after boot happens 1 s after boot, on the target', async () => {
    const { source, target, url, answer } = await pair(vmConfig({ cmdline: 'sim.poweroff_ms=1000' }))
    const booted = Date.now()
    await sleep(500)
    assert.equal((await send(source, { destination_url: url })).status, 204)
    assert.equal((await answer).status, 204)
    assert.deepEqual(await target.exit, { code: 0, signal: null })
    const poweredOff = Date.now() - booted
    assert.ok(poweredOff < 1400, `powered off ${poweredOff} ms after boot: the countdown did not start again on the target`)
    assert.deepEqual((await eventNames(target)).slice(-3), ['vm shutdown', 'vm deleted', 'vmm shutdown'])
  })
})

describe('the receiving VMM', () => {
  it('blocks the VMM thread: a ping waits until the migration ends', async () => {
    const { source, target, url, answer } = await pair(vmConfig({}))
    const finished: string[] = []
    const ping = target.call('GET', 'vmm.ping').then((r) => { finished.push('ping'); return r })
    await sleep(300)
    assert.equal(finished.length, 0, 'no answer while the receive waits for a sender')
    assert.equal((await send(source, { destination_url: url })).status, 204)
    const [received, pong] = await Promise.all([answer.then((r) => { finished.push('receive'); return r }), ping])
    assert.equal(received.status, 204)
    assert.equal(pong.status, 200)
    assert.deepEqual(finished, ['receive', 'ping'])
  })

  it('cannot be ended by SIGTERM while it waits; SIGKILL ends it', async () => {
    const target = await startVmm()
    await receive(target, `unix:${join(target.paths.dir, 'mig.sock')}`)
    target.signal('SIGTERM')
    await sleep(200)
    assert.ok(target.running)
    assert.ok(await target.pingUnanswered())
    assert.deepEqual(await target.stop(), { code: null, signal: 'SIGKILL' })
  })

  it('refuses a bad URL, a booted VM, and a request without receiver_url', async () => {
    const target = await startVmm()
    assert.deepEqual(await target.callJson('PUT', 'vm.receive-migration', { receiver_url: 'http://127.0.0.1:80' }), {
      status: 500,
      json: ['Error from API', 'Error receiving migration', 'Failed to receive migratable component snapshot',
        'Invalid receive migration configuration', 'Expected receiver_url to either use `tcp` or `unix` prefix']
    })
    assert.equal((await target.callJson('PUT', 'vm.receive-migration', {})).status, 400)
    const booted = await bootSource(vmConfig({}))
    const refused = await booted.callJson('PUT', 'vm.receive-migration', { receiver_url: 'unix:/tmp/never-bound.sock' })
    assert.equal(refused.status, 500)
    assert.equal((refused.json as string[]).at(-1), 'Can\'t receive a migration when a VM is already created')
  })
})

describe('vm.send-migration', () => {
  it('refuses a VM that is not booted, a local migration without shared memory, and a bad URL', async () => {
    const prefix = ['Error from API', 'Error dispatching the migration worker', 'Failed to send migratable component snapshot']
    const empty = await startVmm()
    assert.deepEqual(await send(empty, { destination_url: 'unix:/tmp/x.sock' }), { status: 500, json: [...prefix, 'VM is not running'] })
    assert.equal((await empty.callJson('PUT', 'vm.create', vmConfig({}))).status, 204)
    assert.deepEqual(await send(empty, { destination_url: 'unix:/tmp/x.sock' }), { status: 500, json: [...prefix, 'VM is not running'] })

    const vmm = await bootSource(vmConfig({ cmdline: 'sim.migration_fail_at=later' }))
    assert.deepEqual(await send(vmm, { destination_url: 'unix:/tmp/x.sock', local: true }),
      { status: 500, json: [...prefix, 'Local migration requires shared memory or hugepages enabled'] })
    const badUrl = 'Error validating send migration parameters: destination_url must use tcp:<host>:<port> or unix:<path>.'
    assert.deepEqual(await send(vmm, { destination_url: 'http://127.0.0.1:6000' }),
      { status: 500, json: [...prefix, 'Invalid send migration configuration', badUrl] })
    assert.deepEqual(await send(vmm, { destination_url: 'tcp:127.0.0.1' }),
      { status: 500, json: [...prefix, 'Invalid send migration configuration', badUrl, 'Missing TCP port'] })
    assert.deepEqual((await send(vmm, { destination_url: 'tcp:127.0.0.1:6000', local: true })).json,
      [...prefix, 'Invalid send migration configuration', 'Error validating send migration parameters: local option is only supported with UNIX sockets.'])
    assert.equal((await send(vmm, { local: false })).status, 400)
    assert.equal((await send(vmm, { destination_url: 'unix:/tmp/x.sock', downtime_ms: 0 })).status, 400)

    assert.equal(await state(vmm), 'Running')
    assert.ok(!(await eventNames(vmm)).includes('vm migration-started'))
    assert.match(await readFile(vmm.paths.log, 'utf8'), /ignoring unknown or malformed directive "sim.migration_fail_at=later"/)
  })

  it('answers vm.info from the start of the migration and refuses every change while it runs', async () => {
    const { source, url, answer } = await pair(vmConfig({ cmdline: 'sim.migration_mib_per_s=128' }))
    assert.equal((await send(source, { destination_url: url })).status, 204)
    await waitForEvent(source, 'vm migration-started')
    assert.equal(await state(source), 'Running')
    assert.equal((await source.call('GET', 'vmm.ping')).status, 200)
    const refusals: Array<[string, string, unknown?]> = [
      ['vm.shutdown', 'The VM could not shutdown'],
      ['vm.reboot', 'The VM could not reboot'],
      ['vm.power-button', 'Error triggering power button'],
      ['vm.delete', 'The VM could not be deleted'],
      ['vm.boot', 'The VM could not boot'],
      ['vm.create', 'The VM could not be created', vmConfig({})],
      ['vmm.shutdown', 'The VMM could not shutdown']
    ]
    for (const [endpoint, message, body] of refusals) {
      assert.deepEqual(await source.callJson('PUT', endpoint, body), { status: 500, json: ['Error from API', message, MIGRATING] }, endpoint)
    }
    assert.equal(((await send(source, { destination_url: url })).json as string[]).at(-1), 'There is already an ongoing migration')
    assert.ok(source.running)
    assert.equal((await answer).status, 204, 'the migration goes on')
    assert.deepEqual(await source.exit, { code: 0, signal: null })
  })
})

describe('a migration that fails', () => {
  it('exits 1 on SIGTERM to the source mid-migration; the target answers 500 without migration-receive-failed and keeps the config it had received', async () => {
    const config = vmConfig({ cmdline: 'sim.migration_mib_per_s=64' })
    const { source, target, url, answer } = await pair(config)
    assert.equal((await send(source, { destination_url: url })).status, 204)
    await waitUntil('the target bound the serial socket (Config arrived)', async () => (await stat(join(target.paths.dir, CONSOLE)).catch(() => null)) !== null, { timeoutMs: 3000, intervalMs: 10 })
    source.signal('SIGTERM')
    assert.deepEqual(await source.exit, { code: 1, signal: null })
    assert.ok(!(await eventNames(source)).includes('vmm shutdown'))
    assert.ok(await stat(source.paths.apiSocket), 'the socket stays behind, as after any error exit')

    assertSenderGone(await answer)
    assert.ok(!(await eventNames(target)).includes('vm migration-receive-failed'))
    assert.equal(await state(target), 'Created', 'the real receiver returns before its cleanup on EOF')
    assert.ok(target.running)
  })

  it('SIGKILL of the source: the target answers 500 without migration-receive-failed and stays up, its listener\'s socket left behind', async () => {
    const { source, target, url, answer } = await pair(vmConfig({ cmdline: 'sim.migration_mib_per_s=64' }))
    assert.equal((await send(source, { destination_url: url })).status, 204)
    await waitForEvent(source, 'vm migration-started')
    await source.stop()
    assertSenderGone(await answer)
    assert.ok(!(await eventNames(target)).includes('vm migration-receive-failed'))
    assert.equal((await target.call('GET', 'vmm.ping')).status, 200)
    assert.deepEqual(await target.callJson('PUT', 'vm.receive-migration', { receiver_url: url }), {
      status: 500,
      json: ['Error from API', 'Error receiving migration', 'Failed to receive migratable component snapshot',
        'Error binding to UNIX socket', 'Address already in use (os error 98)']
    }, 'the real program does not remove the socket file either')
  })

  it('SIGKILL of the target: the source fails the migration and runs on', async () => {
    const { source, target, url } = await pair(vmConfig({ cmdline: 'sim.migration_mib_per_s=256' }))
    assert.equal((await send(source, { destination_url: url })).status, 204)
    await waitForEvent(target, 'vm migration-receive-started')
    await target.stop()
    await waitForEvent(source, 'vm migration-failed')
    assert.equal(await state(source), 'Running')
    assert.ok(source.running)
  })

  it('a guest power-off during the migration ends the source with exit 1, as SIGTERM does', async () => {
    const { source, url } = await pair(vmConfig({ cmdline: 'sim.migration_mib_per_s=64 sim.poweroff_ms=300' }))
    assert.equal((await send(source, { destination_url: url })).status, 204)
    assert.deepEqual(await source.exit, { code: 1, signal: null })
    assert.ok(!(await eventNames(source)).includes('vm shutdown'))
  })

  it('sim.migration_fail_at=<phase>: the target refuses that command, the source resumes, and keeps its disk locks unless it had released them', async () => {
    for (const phase of ['start', 'config', 'memory', 'state', 'complete']) {
      const disk = await makeDisk(`fail-${phase}.raw`)
      const { source, target, url, answer } = await pair(vmConfig({ disks: [disk], cmdline: `sim.migration_fail_at=${phase}` }))
      assert.equal((await send(source, { destination_url: url })).status, 204)
      assert.deepEqual(await answer, { status: 500, json: ABORTED }, phase)
      await waitForEvent(source, 'vm migration-failed')
      const paused = phase === 'state' || phase === 'complete'
      await waitUntil('the source resumed', async () => await state(source) === 'Running', { timeoutMs: 3000, intervalMs: 10 })
      const sent = (await eventsFrom(source, 'vm migration-started')).filter((name) => !name.startsWith('vm migration-memory-iteration'))
      assert.deepEqual(sent, paused
        ? ['vm migration-started', 'vm pausing', 'vm paused', 'vm migration-failed', 'vm resuming', 'vm resumed']
        : ['vm migration-started', 'vm migration-failed'], phase)
      assert.ok((await eventNames(target)).includes('vm migration-receive-failed'), phase)
      assert.equal(await state(target), 404, `${phase}: the target dropped the VM and its config`)
      assert.ok(source.running && target.running)
      assert.equal(await lockedElsewhere(disk), !paused, `${phase}: the source released its locks before State and did not take them back`)
      await source.stop()
      await target.stop()
    }
  })

  it('sim.migration_stall_after with timeout_s: precopy stops, then the migration fails at the timeout and the source runs on', async () => {
    const { source, target, url, answer } = await pair(vmConfig({ cmdline: 'sim.migration_stall_after=1' }))
    assert.equal((await send(source, { destination_url: url, timeout_s: 1 })).status, 204)
    await waitForEvent(source, 'vm migration-failed', 4000)
    assert.deepEqual(await eventsFrom(source, 'vm migration-started'),
      ['vm migration-started', 'vm migration-memory-iteration 0', 'vm migration-failed'])
    assert.equal(await state(source), 'Running')
    assert.match(await readFile(source.paths.log, 'utf8'), /Migration failed: .*Precopy: Timeout reached: 1s: migration didn't converge in time/)
    assertSenderGone(await answer)
    assert.ok(!(await eventNames(target)).includes('vm migration-receive-failed'))
  })

  it('sim.migration_no_converge: iterations go on until timeout_s cancels the migration', async () => {
    const { source, url, answer } = await pair(vmConfig({ cmdline: 'sim.migration_no_converge' }))
    assert.equal((await send(source, { destination_url: url, timeout_s: 1 })).status, 204)
    await waitForEvent(source, 'vm migration-failed', 4000)
    const names = await eventsFrom(source, 'vm migration-started')
    const iterations = names.slice(1, -1)
    assert.ok(iterations.length >= 5, `${iterations.length} iterations`)
    assert.deepEqual(iterations, iterations.map((_, i) => `vm migration-memory-iteration ${i}`))
    assert.equal(names.at(-1), 'vm migration-failed')
    assert.equal(await state(source), 'Running')
    assert.equal((await answer).status, 500)
  })

  it('timeout_strategy Ignore: a migration that does not converge completes at the timeout', async () => {
    const { source, target, url, answer } = await pair(vmConfig({ cmdline: 'sim.migration_no_converge' }))
    assert.equal((await send(source, { destination_url: url, timeout_s: 1, timeout_strategy: 'Ignore' })).status, 204)
    assert.equal((await answer).status, 204)
    assert.deepEqual(await source.exit, { code: 0, signal: null })
    assert.equal(await state(target), 'Running')
  })

  it('sim.migration_fail_at=ack: the acknowledgement of Complete is lost, and both sides run the VM', async () => {
    const disk = await makeDisk('ack.raw')
    const { source, target, url, answer } = await pair(vmConfig({ disks: [disk], cmdline: 'sim.migration_fail_at=ack' }))
    assert.equal((await send(source, { destination_url: url })).status, 204)
    assert.deepEqual(await answer, { status: 204, json: undefined })
    await waitForEvent(source, 'vm resumed')
    assert.deepEqual((await eventsFrom(source, 'vm migration-failed')), ['vm migration-failed', 'vm resuming', 'vm resumed'])
    assert.equal((await eventNames(target)).at(-1), 'vm migration-receive-finished')
    assert.equal(await state(source), 'Running')
    assert.equal(await state(target), 'Running')
    assert.ok(source.running && target.running)
    assert.ok(await lockedElsewhere(disk), 'the target holds the disk lock; the source runs without it')
  })
})

describe('the guest\'s network', () => {
  const BRIDGE = 'vmpmigbr0'
  const TAP = 'vmpmigtap0'
  /** Each host's port on the LAN: the two ends of one veth pair. */
  const LAN_PORT = 'vmpmiglan'
  const GUEST = '10.78.0.10'
  const ECHO_PORT = 7

  /** Two hosts on one LAN: each namespace's bridge has a TAP for the guest and a port on the other's bridge. */
  async function twoHosts (): Promise<[HostNetwork, HostNetwork]> {
    const hosts = [await createHostNetwork('simmig'), await createHostNetwork('simmig')] as [HostNetwork, HostNetwork]
    networks.push(...hosts)
    const ipBatch = async (netns: string, commands: string[]): Promise<void> => {
      await runCommand('ip', ['-n', netns, '-batch', '-'], { input: commands.join('\n') + '\n' })
    }
    await ipBatch(hosts[0].netns, [`link add ${LAN_PORT} type veth peer name ${LAN_PORT} netns ${hosts[1].netns}`])
    for (const [i, host] of hosts.entries()) {
      await ipBatch(host.netns, [`link add ${BRIDGE} type bridge`, `link set ${LAN_PORT} master ${BRIDGE} up`,
        `link set ${BRIDGE} up`, `addr add 10.78.0.${i + 1}/24 dev ${BRIDGE}`])
      await new TapDevices(host.netns).ensure(TAP, false, BRIDGE)
    }
    return hosts
  }

  /** The port of the bridge the MAC was learned on. */
  async function learnedOn (netns: string, mac: string): Promise<string | null> {
    const fdb = JSON.parse(await runCommand('bridge', ['-n', netns, '-json', 'fdb', 'show', 'br', BRIDGE])) as Array<{ mac: string, ifname: string }>
    return fdb.find((entry) => entry.mac === mac)?.ifname ?? null
  }

  /** The frames and bytes a TAP received from its VMM (the TAP's RX). */
  async function tapReceived (netns: string): Promise<{ packets: number, bytes: number }> {
    const [link] = JSON.parse(await runCommand('ip', ['-n', netns, '-json', '-s', 'link', 'show', TAP])) as Array<{ stats64: { rx: { packets: number, bytes: number } } }>
    return { packets: link!.stats64.rx.packets, bytes: link!.stats64.rx.bytes }
  }

  it('answers on the target at the same address; the target announces the MAC (RARP), so the LAN finds it at once', async () => {
    const [sourceHost, targetHost] = await twoHosts()
    const interfaceId = randomUUID()
    const mac = macOf(interfaceId)
    const seed = join(workspace.dir, 'net-seed.img')
    await buildSeed(seed, 'i-net', { hostname: 'net-guest', sshKeys: [] }, [{ id: interfaceId, address: `${GUEST}/24`, gateway: '10.78.0.1', vni: VNI_RANGE.min, outbound: 'none' }])
    const config = { ...vmConfig({ seed, cmdline: `sim.echo_port=${ECHO_PORT}` }), net: [{ tap: TAP, mac, num_queues: 2 }] }
    const source = await bootSource(config, vmmCommandPrefix(sourceHost.netns, true))
    assert.deepEqual(await ping(sourceHost.netns, GUEST), { sent: 3, received: 3 })
    assert.equal(await learnedOn(sourceHost.netns, mac), TAP)

    const target = await startVmm(vmmCommandPrefix(targetHost.netns, true))
    const url = `unix:${join(target.paths.dir, 'mig.sock')}`
    const { answer } = await receive(target, url)
    assert.equal((await send(source, { destination_url: url })).status, 204)
    assert.equal((await answer).status, 204)
    assert.deepEqual(await source.exit, { code: 0, signal: null })

    // Nothing has asked the guest anything since: only the announcement can have moved the MAC.
    await sleep(1000)
    assert.deepEqual(await tapReceived(targetHost.netns), { packets: 5, bytes: 5 * 1514 }, 'five rounds of one 1514-byte RARP')
    assert.equal(await learnedOn(targetHost.netns, mac), TAP)
    assert.equal(await learnedOn(sourceHost.netns, mac), LAN_PORT, 'the source host\'s bridge now sends the MAC\'s frames over the LAN')
    assert.deepEqual(await ping(sourceHost.netns, GUEST), { sent: 3, received: 3 })
    assert.equal(await tcpEcho(sourceHost.netns, GUEST, ECHO_PORT, { timeoutMs: 2000 }), 'echo ok')
    assert.deepEqual(await ping(targetHost.netns, GUEST), { sent: 3, received: 3 })
  })
})
