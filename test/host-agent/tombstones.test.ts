/**
 * Tombstones: a terminal VMM's record stays until its last report was accepted and a day has
 * passed, then goes with its directory. Runs the agent's supervisor on a real state directory.
 */
import assert from 'node:assert/strict'
import { access, mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { RecordStore } from '../../host-agent/store/record-store.js'
import type { AgentVmmRecord } from '../../host-agent/store/record.js'
import { Supervisor } from '../../host-agent/supervisor/supervisor.js'
import { agentRecord } from './helpers/agent.js'
import { tempDir } from './helpers/simulator.js'
import { testVmmContext } from './helpers/vmm-context.js'

const DAY_MS = 24 * 60 * 60 * 1000

function destroyedRecord (reportedGeneration: number): AgentVmmRecord {
  return agentRecord({
    state: 'destroyed',
    generation: 4,
    reportedGeneration,
    reason: 'VMM killed on request',
    exit: { cause: 'killed', code: null, signal: 'SIGKILL' },
    destroyRequested: true
  })
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
    const supervisor = new Supervisor(testVmmContext(dir.dir, store))
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
