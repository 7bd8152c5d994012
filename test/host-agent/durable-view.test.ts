/**
 * What the agent says of a VMM (its view: the API's answers, the reports) is what its record on
 * disk says, never a change still being saved: an agent killed before the save would come back
 * without it, having told the control plane otherwise. In CI an ensure's VMM was seen `running`,
 * the agent was killed a moment later, and it came back with the VMM `starting`, spawned it
 * again and failed its boot. Here the store holds a save back while the view is read.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { RecordStore } from '../../host-agent/store/record-store.js'
import type { AgentVmmRecord } from '../../host-agent/store/record.js'
import { VmmSupervisor } from '../../host-agent/supervisor/vmm-supervisor.js'
import { agentRecord } from './helpers/agent.js'
import { tempDir } from './helpers/simulator.js'
import { testVmmContext } from './helpers/vmm-context.js'

/** A record store whose saves wait, once held, until let go. */
class HeldStore extends RecordStore {
  #held: Promise<void> | null = null
  #letGo: () => void = () => {}
  saving = false

  hold (): void {
    this.#held = new Promise((resolve) => { this.#letGo = resolve })
  }

  letGo (): void {
    this.#letGo()
  }

  override async save (record: AgentVmmRecord): Promise<void> {
    this.saving = true
    await this.#held
    await super.save(record)
    this.saving = false
  }
}

describe('the view of a VMM', () => {
  let dir: { dir: string, remove: () => Promise<void> }
  before(async () => { dir = await tempDir('vmp-durable-') })
  after(async () => { await dir.remove() })

  it('shows a change only once it is saved', async () => {
    const store = new HeldStore(join(dir.dir, 'state'))
    const record = agentRecord({ generation: 3, reportedGeneration: 3 })
    await store.createDir(record.id)
    await store.save(record)
    const vmm = new VmmSupervisor(testVmmContext(dir.dir, store), record)

    store.hold()
    // Its process is gone while no agent watched: the VMM ends `failed`, cause `vanished`.
    const concluded = vmm.concludeVanished()
    while (!store.saving) await new Promise((resolve) => setTimeout(resolve, 5))
    const during = vmm.view()
    assert.deepEqual({ state: during.state, generation: during.generation }, { state: 'running', generation: 3 },
      'while the change is being saved, the view is the saved record')

    store.letGo()
    await concluded
    const saved = vmm.view()
    assert.deepEqual({ state: saved.state, generation: saved.generation, cause: saved.exit?.cause }, { state: 'failed', generation: 4, cause: 'vanished' })
  })
})
