/**
 * The double-run sampler of the host-loss fault test (test/helpers/vmm-census.ts), on stand-in
 * VMM processes: a copy of bash named `cloud-hypervisor` with a VMM's command line, under VMM
 * directories with the agent's records. Two VMMs of one instance alive at once are a double; a
 * VMM's own forked child, which shows its parent's command line, is not.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { waitUntil } from '../../../stack/wait.js'
import type { TestStack } from '../../helpers/stack.js'
import { takeVmmCensus } from '../../helpers/vmm-census.js'

describe('takeVmmCensus', () => {
  let root: string
  const children: ChildProcess[] = []
  let program: string
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'vmp-census-'))
    program = join(root, 'cloud-hypervisor')
    await copyFile('/bin/bash', program)
  })
  after(async () => {
    for (const child of children) if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
    await rm(root, { recursive: true, force: true })
  })

  const stack = (): TestStack => ({ info: { hosts: ['host-1', 'host-2'].map((id) => ({ id, stateDir: join(root, id) })) } }) as unknown as TestStack

  /** A stand-in VMM of `instanceId` on `hostId`; with `forks`, it keeps a forked child of itself alive too. */
  async function vmm (hostId: string, vmmId: string, instanceId: string, forks = false): Promise<void> {
    const dir = join(root, hostId, 'vmms', vmmId)
    await mkdir(dir, { recursive: true })
    await writeFile(join(dir, 'record.json'), JSON.stringify({ instanceId }))
    const script = forks ? '( sleep 60; true ) & wait' : 'sleep 60; true'
    const child = spawn(program, ['-c', script, 'vmm', '--api-socket', `path=${join(dir, 'api.sock')}`], { detached: true, stdio: 'ignore' })
    children.push(child)
  }

  async function sampled (census: ReturnType<typeof takeVmmCensus>, count: number): Promise<void> {
    const from = census.samples()
    await waitUntil(`${count} samples`, async () => census.samples() >= from + count, { timeoutMs: 10_000, intervalMs: 20 })
  }

  it('counts no double for one VMM per instance, a VMM\'s forked child included', async () => {
    await vmm('host-1', 'vmm-a', 'instance-a', true)
    await vmm('host-2', 'vmm-b', 'instance-b')
    const census = takeVmmCensus(stack(), 20)
    await sampled(census, 10)
    await census.stop()
    assert.deepEqual(census.doubles(), [])
  })

  it('counts two VMMs of one instance alive at once, wherever they run', async () => {
    await vmm('host-1', 'vmm-c', 'instance-c')
    await vmm('host-2', 'vmm-d', 'instance-c')
    const census = takeVmmCensus(stack(), 20)
    await sampled(census, 10)
    await census.stop()
    const doubles = census.doubles().filter((d) => d.instanceId === 'instance-c')
    assert.ok(doubles.length > 0, 'no double seen')
    assert.deepEqual(doubles[0]!.vmms.map((v) => v.replace(/ \(pid \d+\)$/, '')).sort(), ['vmm-c on host-1', 'vmm-d on host-2'])
  })
})
