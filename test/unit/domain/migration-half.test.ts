/**
 * The agent's half of a live migration (domain/migration-half.ts), from tables: what each of
 * Cloud Hypervisor's events does to a target's or a source's half, the lost acknowledgement's
 * hold among them, and what a restarted agent does with a target whose receive it lost.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { adoptedReceiveStep, halfStepOnEvent, type HalfEventStep } from '../../../domain/migration-half.js'
import type { MigrationHalfPhase, MigrationRole, VmmMigration } from '../../../domain/vmm.js'

function half (role: MigrationRole, phase: MigrationHalfPhase, iterations = 0): VmmMigration {
  return { id: 'mig-1', role, phase, receiverUrl: null, iterations, progressAt: '2026-11-27T00:00:00Z', reason: null }
}

const vm = (event: string, properties: Record<string, string> | null = null) => ({ source: 'vm', event, properties })

describe('halfStepOnEvent', () => {
  const cases: Array<{ name: string, half: VmmMigration | null, downtimeBegan?: boolean, event: ReturnType<typeof vm>, step: HalfEventStep }> = [
    // target
    { name: 'target: listening', half: half('target', 'preparing'), event: vm('migration-receive-ready'), step: { step: 'advance', phase: 'ready' } },
    { name: 'target: receiving', half: half('target', 'ready'), event: vm('migration-receive-started'), step: { step: 'advance', phase: 'receiving' } },
    { name: 'target: a late ready after receiving changes nothing', half: half('target', 'receiving'), event: vm('migration-receive-ready'), step: { step: 'none' } },
    { name: 'target: an event applied twice changes nothing the second time', half: half('target', 'ready'), event: vm('migration-receive-ready'), step: { step: 'none' } },
    { name: 'target: finished receiving, the commit point', half: half('target', 'receiving'), event: vm('migration-receive-finished'), step: { step: 'receive-finished' } },
    { name: 'target: finished even when the started event was missed', half: half('target', 'ready'), event: vm('migration-receive-finished'), step: { step: 'receive-finished' } },
    { name: 'target: the receive failed', half: half('target', 'receiving'), event: vm('migration-receive-failed'), step: { step: 'receive-failed' } },
    { name: 'target: a finished half never changes', half: half('target', 'finished'), event: vm('migration-receive-failed'), step: { step: 'none' } },
    { name: 'target: a source’s event means nothing to it', half: half('target', 'receiving'), event: vm('migration-failed'), step: { step: 'none' } },
    // source
    { name: 'source: the send taken', half: half('source', 'sending'), event: vm('migration-started'), step: { step: 'send-started' } },
    { name: 'source: a memory iteration is progress', half: half('source', 'sending', 1), event: vm('migration-memory-iteration', { id: '1' }), step: { step: 'iteration', iterations: 2 } },
    { name: 'source: an iteration seen already is not', half: half('source', 'sending', 2), event: vm('migration-memory-iteration', { id: '1' }), step: { step: 'none' } },
    { name: 'source: the VM paused, the downtime begins', half: half('source', 'sending'), event: vm('paused'), step: { step: 'downtime-began' } },
    { name: 'source: sent, the process exits next', half: half('source', 'sending'), event: vm('migration-finished'), step: { step: 'sent' } },
    { name: 'source: failed before the downtime, the VM runs on here', half: half('source', 'sending'), event: vm('migration-failed'), step: { step: 'send-failed' } },
    // One guest, one place: past the downtime the target may have the VM.
    { name: 'source: failed past the downtime (the acknowledgement lost) holds the VM paused', half: half('source', 'sending'), downtimeBegan: true, event: vm('migration-failed'), step: { step: 'hold' } },
    { name: 'source: a held half waits for the control plane whatever Cloud Hypervisor says', half: half('source', 'held'), downtimeBegan: true, event: vm('resumed'), step: { step: 'none' } },
    { name: 'source: a held half ignores a late failure', half: half('source', 'held'), downtimeBegan: true, event: vm('migration-failed'), step: { step: 'none' } },
    { name: 'source: a failed half never changes', half: half('source', 'failed'), event: vm('migration-finished'), step: { step: 'none' } },
    // neither
    { name: 'no half: nothing to move', half: null, event: vm('migration-finished'), step: { step: 'none' } },
    { name: 'an event of the VMM, not the VM', half: half('source', 'sending'), event: { source: 'vmm', event: 'migration-failed', properties: null }, step: { step: 'none' } }
  ]
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(halfStepOnEvent(c.half, c.downtimeBegan ?? false, c.event), c.step)
    })
  }
})

describe('adoptedReceiveStep', () => {
  const cases: Array<{ vmState: string | null, phase: MigrationHalfPhase, step: ReturnType<typeof adoptedReceiveStep> }> = [
    { vmState: 'Running', phase: 'receiving', step: 'finish' },
    { vmState: 'Running', phase: 'preparing', step: 'finish' },
    { vmState: null, phase: 'preparing', step: 'issue-receive' },
    { vmState: null, phase: 'ready', step: 'fail' },
    { vmState: 'Created', phase: 'receiving', step: 'fail' },
    { vmState: 'Paused', phase: 'receiving', step: 'fail' }
  ]
  for (const c of cases) {
    it(`a VM ${c.vmState ?? 'absent'} with the half ${c.phase}: ${c.step}`, () => {
      assert.equal(adoptedReceiveStep(c.vmState, c.phase), c.step)
    })
  }
})
