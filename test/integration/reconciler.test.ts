/**
 * The reconciler (activities/reconciler.ts) against hand-made orphans: a VMM created on a host
 * agent behind vmplane's back (its instance unknown to PostgreSQL) and a simulator process
 * started in an agent's state layout that no record owns. Neither is touched while younger than
 * the orphan grace period; the next pass after it reaps both and says so. Then a TAP no VMM has
 * (removed at once), and a disk, a seed and a half-made file in the storage that no record owns
 * (removed once older than the grace period), beside a live instance that keeps its own.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { tapNameOf } from '../../domain/interfaces.js'
import { VNI_RANGE, segmentBridgeOf, segmentVxlanOf } from '../../domain/network-segments.js'
import { diskFileOf, seedFileOf } from '../../domain/storage.js'
import { launchVmm, vmmPaths } from '../../host-agent/cloud-hypervisor/launch.js'
import { runCommand } from '../../host-agent/process/command.js'
import { HOST_UPLINK } from '../../stack/host-network.js'
import { SIMULATOR_PATH } from '../../stack/hypervisor.js'
import { checkInvariants, violationsOf } from '../helpers/invariants.js'
import { findVmmProcesses } from '../../stack/processes.js'
import { waitFor } from '../../stack/wait.js'
import { newInstance, runningInstance, vmmProcesses, waitForState } from '../helpers/instances.js'
import { RECONCILE_ON_DEMAND_ONLY, lastReconcilePass, nextReconcilePass, temporalCli, type ReconcilePass } from '../helpers/operator.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const GRACE_SECONDS = 4

describe('the reconciler', () => {
  let stack: TestStack
  before(async () => {
    // Passes only on demand here, so that each one the test asks for is the one it reads.
    stack = await startStack({ hosts: 1, env: { VMPLANE_ORPHAN_GRACE_SECONDS: String(GRACE_SECONDS), VMPLANE_RECONCILE_SECONDS: RECONCILE_ON_DEMAND_ONLY } })
  })
  after(async () => { await stack?.stop() })

  /** Triggers a pass (through the API, or with `temporal schedule trigger`) and waits for its record. */
  async function reconcileNow (via: 'api' | 'temporal' = 'api'): Promise<ReconcilePass> {
    const previous = (await lastReconcilePass(stack))?.id ?? null
    if (via === 'api') {
      assert.equal((await api(stack).post('/v1/admin/reconcile')).status, 202)
    } else {
      await temporalCli(stack, 'schedule', 'trigger', '--schedule-id', 'vmplane-reconciler')
    }
    return await nextReconcilePass(stack, previous)
  }

  it('runs as a Temporal Schedule, triggered by the API and by `temporal schedule trigger`', async () => {
    const host = stack.info.hosts[0]!.id
    const viaApi = await reconcileNow('api')
    assert.equal(viaApi.counts.hostsChecked, 1, `the pass checked ${host}: ${JSON.stringify(viaApi.counts)}`)
    const viaCli = await reconcileNow('temporal')
    assert.notEqual(viaCli.id, viaApi.id)
    assert.equal(viaCli.counts.hostsChecked, 1)
  })

  it('leaves running instances alone', async () => {
    const instance = await runningInstance(stack, 'kept-by-reconciler')
    await sleep(GRACE_SECONDS * 1000)
    const pass = await reconcileNow()
    assert.equal(pass.counts.orphansReaped ?? 0, 0)
    assert.equal(pass.counts.instancesRedriven ?? 0, 0)
    assert.equal((await vmmProcesses(stack, instance.vmm!)).length, 1)
  })

  it('reaps a VMM unknown to PostgreSQL and a stray VMM process after the grace period, and reports both', async () => {
    const host = stack.info.hosts[0]!
    const orphanId = randomUUID()
    const put = await fetch(`${host.url}/v1/vmms/${orphanId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${stack.info.agentToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ instanceId: randomUUID(), instanceName: 'made-by-hand', spec: { vcpus: 1, memoryMiB: 256, boot: newInstance('x').boot } })
    })
    assert.equal(put.status, 201, await put.text())
    const strayPaths = vmmPaths(join(host.stateDir, 'vmms', randomUUID()))
    await mkdir(strayPaths.dir, { recursive: true })
    launchVmm(SIMULATOR_PATH, strayPaths)
    const orphanDir = join(host.stateDir, 'vmms', orphanId)
    await waitFor('both hand-made VMM processes up', async () =>
      (await findVmmProcesses(orphanDir)).length === 1 && (await findVmmProcesses(strayPaths.dir)).length === 1, { timeoutMs: 10_000 })

    const early = await reconcileNow()
    assert.equal(early.counts.orphansWaiting, 1, `within the grace period: ${JSON.stringify(early.counts)}`)
    assert.equal(early.counts.straysWaiting, 1)
    assert.equal((await findVmmProcesses(orphanDir)).length, 1, 'not reaped within the grace period')

    await sleep(GRACE_SECONDS * 1000)
    const pass = await reconcileNow()
    assert.equal(pass.counts.orphansReaped, 1, JSON.stringify(pass))
    assert.equal(pass.counts.straysReaped, 1, JSON.stringify(pass))
    assert.ok(pass.actions.some((a) => a.includes(orphanId) && a.includes('unknown to the control plane')), pass.actions.join('\n'))
    assert.ok(pass.actions.some((a) => a.includes(strayPaths.apiSocket)), pass.actions.join('\n'))
    assert.deepEqual(await findVmmProcesses(orphanDir), [])
    assert.deepEqual(await findVmmProcesses(strayPaths.dir), [])
    assert.deepEqual(violationsOf(await checkInvariants(stack.info)), [])
  })

  it('removes a TAP no VMM has and the segments no live TAP is on at once, and storage no record owns once older than the grace period; a live instance keeps its own', async () => {
    const host = stack.info.hosts[0]!
    const storage = host.storageDir
    const live = await runningInstance(stack, 'disks-kept-by-reconciler')
    // What a crash leaves: a segment with the TAP of a VMM that never ran, and one half made.
    const orphanTap = tapNameOf(randomUUID())
    const [leftover, halfMadeSegment] = [VNI_RANGE.max, VNI_RANGE.max - 1]
    await runCommand('ip', ['-n', host.netns, '-batch', '-'], {
      input: [
        `link add ${segmentBridgeOf(leftover)} type bridge`,
        `link add ${segmentVxlanOf(leftover)} type vxlan id ${leftover} dstport 4789 dev ${HOST_UPLINK}`,
        `link set ${segmentVxlanOf(leftover)} master ${segmentBridgeOf(leftover)}`,
        `tuntap add dev ${orphanTap} mode tap`,
        `link set ${orphanTap} master ${segmentBridgeOf(leftover)}`,
        `link add ${segmentVxlanOf(halfMadeSegment)} type vxlan id ${halfMadeSegment} dstport 4789 dev ${HOST_UPLINK}`
      ].join('\n') + '\n'
    })
    const orphanDisk = join(storage, diskFileOf({ id: randomUUID() }))
    const orphanSeed = join(storage, seedFileOf(randomUUID()))
    const halfMade = join(storage, 'partial', `host-gone.${randomUUID()}`)
    await runCommand('qemu-img', ['create', '-q', '-f', 'raw', orphanDisk, '1G'])
    for (const file of [orphanSeed, halfMade]) await writeFile(file, 'left behind\n')

    const young = await reconcileNow()
    assert.equal(young.counts.tapsReaped, 1, `a TAP no VMM has goes at once: ${JSON.stringify(young.counts)}`)
    assert.equal(young.counts.segmentsReaped, 2, `so do segments no live TAP is on: ${JSON.stringify(young.counts)}`)
    assert.equal(young.counts.storageWaiting, 3, 'files younger than the grace period wait')
    const hourAgo = new Date(Date.now() - 3_600_000)
    for (const file of [orphanDisk, orphanSeed, halfMade]) await utimes(file, hourAgo, hourAgo)

    const pass = await reconcileNow()
    assert.deepEqual([pass.counts.disksReaped, pass.counts.seedsReaped, pass.counts.partialFilesReaped], [1, 1, 1], JSON.stringify(pass))
    for (const file of [orphanDisk, orphanSeed, halfMade]) assert.equal(existsSync(file), false, `${file} removed`)
    const links = await runCommand('ip', ['-n', host.netns, 'link', 'show'])
    assert.ok(!links.includes(orphanTap), 'the orphan TAP is gone')
    const kept = (await api(stack).get<{ disks: Array<{ location: string }>, interfaces: Array<{ tap: string }> }>(`/v1/instances/${live.id}`)).body
    for (const disk of kept.disks) assert.ok(existsSync(join(storage, disk.location)), `${disk.location} kept`)
    assert.ok(links.includes(kept.interfaces[0]!.tap), "the live instance's TAP kept")
    for (const vni of [leftover, halfMadeSegment]) {
      assert.ok(!links.includes(segmentBridgeOf(vni)) && !links.includes(segmentVxlanOf(vni)), `segment ${vni} is gone`)
    }
    const { body: network } = await api(stack).get<{ vni: number }>('/v1/networks/default')
    assert.ok(links.includes(segmentVxlanOf(network.vni)), "the live instance's segment kept")
    assert.deepEqual(violationsOf(await checkInvariants(stack.info)), [])
  })

  // Last: its host is lost afterwards.
  it('tells an instance again that its VMM was fenced with its lost host, when the fan-out never reached it', async () => {
    const instance = await runningInstance(stack, 'lost-unheard')
    const hostId = stack.info.hosts[0]!.id
    // The host is away: its agent, heard again, would have the fenced VMM killed, and its report
    // of that would tell the instance before the reconciler does.
    await stack.kill(`agent-${hostId}`, 'SIGSTOP')
    const db = new pg.Client({ connectionString: stack.info.databaseUrl })
    await db.connect()
    try {
      // The fence as host-fencing.ts commits it, its signal to the instance never sent.
      await db.query("UPDATE hosts SET status = 'lost', status_since = now() WHERE id = $1", [hostId])
      await db.query("UPDATE vmms SET state = 'lost', reason = 'host declared lost by an operator; VMM fenced', destroyed_at = now() WHERE id = $1", [instance.vmm!.id])
      await sleep(GRACE_SECONDS * 1000)
      const pass = await reconcileNow()
      assert.equal(pass.counts.hostLossesRetold, 1, JSON.stringify(pass))
      const failed = await waitForState(stack, instance.id, 'failed')
      assert.equal(failed.lastError?.code, 'HostLost')
    } finally {
      await db.end()
      await stack.kill(`agent-${hostId}`, 'SIGCONT')
    }
  })
})
