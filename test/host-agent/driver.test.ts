/**
 * The Cloud Hypervisor driver (launch, REST client, event-file tail) against the simulator, and
 * against a real cloud-hypervisor where this machine has one, a usable /dev/kvm and a kernel to
 * boot (VMPLANE_TEST_KERNEL); otherwise the real target is skipped with the reason.
 */
import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { open, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { CloudHypervisorClient } from '../../host-agent/cloud-hypervisor/api-client.js'
import { VmmApiError, VmmUnreachableError } from '../../host-agent/cloud-hypervisor/errors.js'
import { EventFileTail, readEventFile } from '../../host-agent/cloud-hypervisor/event-monitor.js'
import { apiSocketOfCommandLine, launchVmm, vmmPaths, type VmmPaths } from '../../host-agent/cloud-hypervisor/launch.js'
import { buildVmConfig } from '../../host-agent/cloud-hypervisor/vm-config.js'
import type { VmmSpec } from '../../domain/host-agent-api.js'
import { waitUntil } from '../../stack/wait.js'
import { findOnPath } from '../../scripts/tools/paths.js'
import { SIMULATOR_BINARY, useWorkspace } from './helpers/simulator.js'

interface Target {
  name: string
  binary: string
  kernel: string | null
  simulated: boolean
  skip: string | false
}

/** A real cloud-hypervisor target, or why there is none on this machine. */
async function realTarget (): Promise<Target> {
  const target: Target = { name: 'real cloud-hypervisor', binary: '', kernel: null, simulated: false, skip: false }
  const binary = await findOnPath('cloud-hypervisor')
  if (binary === null) return { ...target, skip: 'no cloud-hypervisor binary on PATH' }
  try {
    await (await open('/dev/kvm', 'r+')).close()
  } catch (err) {
    return { ...target, skip: `/dev/kvm is not usable: ${(err as Error).message}` }
  }
  const kernel = process.env.VMPLANE_TEST_KERNEL
  if (kernel === undefined || kernel === '') {
    return { ...target, skip: 'VMPLANE_TEST_KERNEL is not set to a bootable vmlinux (ACPI power-off) for the real cloud-hypervisor' }
  }
  return { ...target, binary, kernel }
}

const spec: VmmSpec = { vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux', cmdline: 'console=ttyS0' } }
const targets: Target[] = [
  { name: 'simulator', binary: SIMULATOR_BINARY, kernel: null, simulated: true, skip: false },
  await realTarget()
]

const workspace = useWorkspace('vmp-drv-')
const children: ChildProcess[] = []

after(() => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL')
  }
})

interface Launched {
  paths: VmmPaths
  child: ChildProcess
  exit: Promise<[number | null, NodeJS.Signals | null]>
  client: CloudHypervisorClient
}

async function launch (target: Target): Promise<Launched> {
  const paths = vmmPaths(await workspace.nextDir())
  const child = launchVmm(target.binary, paths)
  // The driver unrefs the process so an agent can exit without it; the test waits for it.
  child.ref()
  children.push(child)
  const exit = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  const client = new CloudHypervisorClient(paths.apiSocket, 2000)
  await waitUntil('the VMM API', async () => { await client.ping(); return true }, { timeoutMs: 10_000, intervalMs: 10 })
  return { paths, child, exit, client }
}

function configFor (target: Target, vmm: Launched, cmdline = 'console=ttyS0') {
  const kernel = target.kernel ?? workspace.kernel
  return buildVmConfig({ ...spec, boot: { ...spec.boot, cmdline } }, { kernel, initramfs: null, disks: [], nets: [] }, vmm.paths.console)
}

for (const target of targets) {
  describe(`driver against the ${target.name}`, { skip: target.skip }, () => {
    it('launches the VMM detached, with only the socket, event monitor, log file and -v', async () => {
      const vmm = await launch(target)
      const argv = (await readFile(`/proc/${vmm.child.pid}/cmdline`, 'utf8')).split('\0').slice(0, -1)
      assert.deepEqual(argv.slice(1), ['--api-socket', `path=${vmm.paths.apiSocket}`, '--event-monitor', `path=${vmm.paths.events}`, '--log-file', vmm.paths.log, '-v'])
      assert.equal(apiSocketOfCommandLine(argv), vmm.paths.apiSocket)
      const stat = await readFile(`/proc/${vmm.child.pid}/stat`, 'utf8')
      const [pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(2, 4).map(Number)
      assert.equal(pgrp, vmm.child.pid, 'its own process group')
      assert.equal(session, vmm.child.pid, 'its own session')
      assert.ok((await vmm.client.ping()).version.length > 0)
    })

    it('creates, boots, shuts down, boots again and deletes a VM, with the real status codes', async () => {
      const vmm = await launch(target)
      const config = configFor(target, vmm)
      await vmm.client.createVm(config)
      const created = await vmm.client.info()
      assert.equal(created.state, 'Created')
      assert.equal(created.config.memory.size, 128 * 1024 * 1024)
      await assert.rejects(vmm.client.createVm(config), (err: unknown) =>
        err instanceof VmmApiError && err.status === 500 && err.chain.includes('VM is already created'))
      await vmm.client.bootVm(AbortSignal.timeout(30_000))
      assert.equal((await vmm.client.info()).state, 'Running')
      await vmm.client.shutdownVm()
      assert.equal((await vmm.client.info()).state, 'Created')
      await vmm.client.bootVm(AbortSignal.timeout(30_000))
      await vmm.client.deleteVm()
      await assert.rejects(vmm.client.info(), (err: unknown) => err instanceof VmmApiError && err.status === 404)
      await vmm.client.deleteVm()
    })

    it('reboots in the same process and sees the reboot in the event file', async () => {
      const vmm = await launch(target)
      await vmm.client.createVm(configFor(target, vmm))
      await vmm.client.bootVm(AbortSignal.timeout(30_000))
      const pid = (await vmm.client.ping()).pid
      await vmm.client.rebootVm(AbortSignal.timeout(30_000))
      assert.equal((await vmm.client.ping()).pid, pid)
      const events = (await readEventFile(vmm.paths.events)).events.map((e) => e.event)
      assert.ok(events.includes('rebooting') && events.includes('rebooted'))
    })

    it('sees the process exit 0 when the guest powers off on the power button', async () => {
      const vmm = await launch(target)
      await vmm.client.createVm(configFor(target, vmm))
      await vmm.client.bootVm(AbortSignal.timeout(30_000))
      const tail = new EventFileTail(vmm.paths.events)
      const seen: string[] = []
      tail.on('event', (e) => seen.push(`${e.source} ${e.event}`))
      await tail.start('end')
      await vmm.client.powerButton()
      assert.deepEqual(await vmm.exit, [0, null])
      await tail.catchUp()
      tail.stop()
      assert.deepEqual(seen.slice(-3), ['vm shutdown', 'vm deleted', 'vmm shutdown'])
    })

    it('ends the VMM with vmm.shutdown (exit 0)', async () => {
      const vmm = await launch(target)
      await vmm.client.shutdownVmm()
      assert.deepEqual(await vmm.exit, [0, null])
    })
  })
}

describe('driver failure modes (simulator)', () => {
  const simulator = targets[0]!

  it('reports a missing socket as unreachable, not as an API error', async () => {
    const client = new CloudHypervisorClient(join(workspace.dir, 'no.sock'), 500)
    await assert.rejects(client.ping(), (err: unknown) => err instanceof VmmUnreachableError && err.reason === 'no-socket')
  })

  it('times out a call to a wedged API, and aborts a long call on request', async () => {
    const vmm = await launch(simulator)
    await vmm.client.createVm(configFor(simulator, vmm, 'sim.boot_ms=never'))
    const abort = new AbortController()
    const boot = vmm.client.bootVm(abort.signal)
    await waitUntil('the boot under way', async () => (await readEventFile(vmm.paths.events)).events.some((e) => e.event === 'booting'),
      { timeoutMs: 5000, intervalMs: 10 })
    const fast = new CloudHypervisorClient(vmm.paths.apiSocket, 200)
    await assert.rejects(fast.ping(), (err: unknown) => err instanceof VmmUnreachableError && err.reason === 'timeout')
    abort.abort()
    await assert.rejects(boot, (err: unknown) => err instanceof VmmUnreachableError && err.reason === 'aborted')
    fast.close()
  })

  it('keeps following the event file past garbage', async () => {
    const vmm = await launch(simulator)
    const tail = new EventFileTail(vmm.paths.events)
    const events: string[] = []
    const garbage: string[] = []
    tail.on('event', (e) => events.push(e.event))
    tail.on('garbage', (text) => garbage.push(text))
    await tail.start(0)
    await vmm.client.createVm(configFor(simulator, vmm, 'sim.garbage_events'))
    await vmm.client.bootVm(AbortSignal.timeout(5000))
    await vmm.client.rebootVm(AbortSignal.timeout(5000))
    await tail.catchUp()
    tail.stop()
    assert.ok(garbage.length > 0)
    assert.ok(events.includes('rebooted'), 'events after the garbage are still read')
  })
})
