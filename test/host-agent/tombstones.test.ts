/**
 * Tombstones: a terminal VMM's record stays until its last report was accepted and a day has
 * passed, then goes with its directory. Runs the agent's supervisor on a real state directory.
 */
import assert from 'node:assert/strict'
import { access, mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { pino } from 'pino'
import { ImageResolver } from '../../host-agent/images.js'
import { TapDevices } from '../../host-agent/network/taps.js'
import { InstanceStorage } from '../../host-agent/storage/instance-storage.js'
import { RecordStore } from '../../host-agent/store/record-store.js'
import type { AgentVmmRecord } from '../../host-agent/store/record.js'
import { MigrationTransport } from '../../host-agent/supervisor/migration-transport.js'
import { Supervisor } from '../../host-agent/supervisor/supervisor.js'
import { VmmDevices } from '../../host-agent/supervisor/vmm-devices.js'
import { ensureBody, newVmmId } from './helpers/agent.js'
import { SIMULATOR_BINARY, tempDir } from './helpers/simulator.js'

const DAY_MS = 24 * 60 * 60 * 1000

function destroyedRecord (reportedGeneration: number): AgentVmmRecord {
  const at = new Date().toISOString()
  const body = ensureBody() as Pick<AgentVmmRecord, 'instanceId' | 'instanceName' | 'spec'>
  return {
    id: newVmmId(),
    ...body,
    state: 'destroyed',
    generation: 4,
    reportedGeneration,
    pid: null,
    pidStartTime: null,
    createdAt: at,
    updatedAt: at,
    reason: 'VMM killed on request',
    exit: { cause: 'killed', code: null, signal: 'SIGKILL' },
    stopDeadline: null,
    unresponsiveSince: null,
    destroyRequested: true,
    pendingKill: null,
    migration: null,
    incoming: null,
    outgoing: null
  }
}

describe('tombstones', () => {
  let dir: { dir: string, remove: () => Promise<void> }
  before(async () => { dir = await tempDir('vmp-tomb-') })
  after(async () => { await dir.remove() })

  it('are kept while unreported or younger than a day, and removed after', async () => {
    const store = new RecordStore(join(dir.dir, 'state'))
    const reported = destroyedRecord(4)
    const unreported = destroyedRecord(3)
    for (const record of [reported, unreported]) {
      await mkdir(store.dirOf(record.id), { recursive: true })
      await writeFile(join(store.dirOf(record.id), 'record.json'), JSON.stringify(record))
    }
    const images = new ImageResolver(dir.dir)
    const supervisor = new Supervisor({
      settings: {
        hostId: 'host-test',
        cloudHypervisor: SIMULATOR_BINARY,
        vmmCallTimeoutMs: 1000,
        vmmPingIntervalMs: 1000,
        powerButtonIntervalMs: 1000,
        processPollMs: 1000,
        apiReadyTimeoutMs: 1000,
        killWaitMs: 1000,
        commandPrefix: [],
        serialLogBytes: 1024
      },
      store,
      devices: new VmmDevices(images, new InstanceStorage(join(dir.dir, 'storage'), 'host-test', images), new TapDevices(null, 'vmplane0')),
      transport: new MigrationTransport({ kind: 'unix', dir: join(dir.dir, 'migrations') }),
      log: pino({ level: 'silent' }),
      onChange: () => {},
      onKill: () => {},
      onMigrationEnded: () => {}
    })
    await supervisor.start()
    try {
      assert.equal(supervisor.list().length, 2, 'young tombstones stay')
      await supervisor.purgeTombstones(Date.now() + DAY_MS + 60_000)
      assert.deepEqual(supervisor.list().map((v) => v.id), [unreported.id], 'an unreported one stays')
      await assert.rejects(access(store.dirOf(reported.id)))
      await access(store.dirOf(unreported.id))
    } finally {
      supervisor.release()
    }
  })
})
