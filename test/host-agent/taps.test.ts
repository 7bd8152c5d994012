/**
 * The agent's TAP devices (host-agent/network/taps.ts) in a network namespace of the test's own,
 * with the real iproute2 behind a shim that counts its runs: a new TAP is made, attached to its
 * bridge and brought UP by one run of ip; one found detached or down is attached and brought UP;
 * one made for another queue count is made again; one as it should be is left as it is.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { TapDevices } from '../../host-agent/network/taps.js'
import { runCommand } from '../../host-agent/process/command.js'
import { createHostNetwork, type HostNetwork } from '../../stack/host-network.js'
import { countRuns, type CountedTool } from '../helpers/counted-tool.js'

const BRIDGE = 'br-taps'

describe('TAP devices', () => {
  let dir: string
  let network: HostNetwork
  let taps: TapDevices
  let ip: CountedTool
  let serial = 0
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vmplane-taps-'))
    network = await createHostNetwork('tap')
    await runCommand('ip', ['-n', network.netns, 'link', 'add', BRIDGE, 'type', 'bridge'])
    taps = new TapDevices(network.netns)
    ip = await countRuns('ip', dir)
  })
  after(async () => {
    ip?.restore()
    await network?.remove()
    await rm(dir, { recursive: true, force: true })
  })

  const newName = (): string => `vmptest${++serial}`
  const ipHere = async (...args: string[]): Promise<void> => { await runCommand('ip', ['-n', network.netns, ...args]) }

  it('makes a new TAP attached to the bridge and UP with one run of ip', async () => {
    const name = newName()
    await ip.reset()
    await taps.ensure(name, false, BRIDGE)
    assert.equal((await ip.runs()).length, 1, (await ip.runs()).join('\n'))
    assert.deepEqual(await taps.find(name), { name, multiQueue: false, bridge: BRIDGE, up: true })
  })

  it('attaches and brings UP a TAP found detached and down', async () => {
    const name = newName()
    await ipHere('tuntap', 'add', 'dev', name, 'mode', 'tap', 'vnet_hdr')
    await taps.ensure(name, false, BRIDGE)
    assert.deepEqual(await taps.find(name), { name, multiQueue: false, bridge: BRIDGE, up: true })
  })

  it('makes again a TAP made for another queue count', async () => {
    const name = newName()
    await taps.ensure(name, false, BRIDGE)
    await taps.ensure(name, true, BRIDGE)
    assert.deepEqual(await taps.find(name), { name, multiQueue: true, bridge: BRIDGE, up: true })
  })

  it('leaves a TAP that is as it should be as it is', async () => {
    const name = newName()
    await taps.ensure(name, false, BRIDGE)
    await ip.reset()
    await taps.ensure(name, false, BRIDGE)
    const runs = await ip.runs()
    assert.ok(!runs.some((run) => /\b(del|nomaster|down)\b/.test(run)), runs.join('\n'))
    assert.deepEqual(await taps.find(name), { name, multiQueue: false, bridge: BRIDGE, up: true })
  })

  it('says why when the TAP cannot be made', async () => {
    await assert.rejects(taps.ensure(newName(), false, 'no-such-bridge'), /failed: .*"no-such-bridge" is wrong: Device does not exist/)
  })
})
