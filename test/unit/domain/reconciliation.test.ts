/**
 * The reconciler's decisions (domain/reconciliation.ts), from tables: what a host's pass mends
 * given its inventory and what PostgreSQL holds, and which stored files are orphans.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { SegmentView, StrayView, TapView, VmmPolicy, VmmView } from '../../../domain/host-agent-api.js'
import { hostMends, storageOrphans, type HostMend, type KnownVmm } from '../../../domain/reconciliation.js'
import type { VmmRecord, VmmState } from '../../../domain/vmm.js'

const NOW = Date.parse('2026-11-27T12:00:00Z')
const clock = { now: NOW, graceMs: 60_000 }
const OLD = '2026-11-27T11:00:00Z'
const YOUNG = '2026-11-27T11:59:30Z'

function view (id: string, state: VmmState, generation: number, createdAt = OLD, updatedAt = createdAt, policy: VmmPolicy | null = null): VmmView {
  return { id, instanceId: `i-${id}`, state, generation, createdAt, updatedAt, policy } as unknown as VmmView
}

/** A firewall policy at a generation, allowing TCP 8080 from the ranges given. */
function policy (generation: number, peers: string[]): VmmPolicy {
  return { generation, ingress: peers.length === 0 ? [] : [{ protocol: 'tcp', ports: { from: 8080, to: 8080 }, peers }], egress: null, routes: [] }
}

function known (id: string, state: VmmState, generation: number, options: { instanceDestroyed?: boolean, createdAt?: string } = {}): [string, KnownVmm] {
  const vmm = { id, instanceId: `i-${id}`, hostId: 'host-1', state, generation, createdAt: options.createdAt ?? OLD } as unknown as VmmRecord
  return [id, { vmm, instanceDestroyed: options.instanceDestroyed ?? false }]
}

const stray = (pid: number, startedAt: string): StrayView => ({ pid, startTime: '1', apiSocket: `/run/${pid}.sock`, startedAt })
const tap = (name: string, vmmId: string | null): TapView => ({ name, vmmId, multiQueue: false, bridge: null, up: true })
const segment = (vni: number, taps: string[], routed = false): SegmentView => ({ vni, bridge: `vmpn${vni.toString(16).padStart(6, '0')}`, joined: true, taps, routed })

/** A mend as a short line: what, and about which. */
function said (m: HostMend): string {
  switch (m.mend) {
    case 'reap-orphan': return `reap-orphan ${m.vmm.id}: ${m.why}`
    case 'orphan-waiting': return `orphan-waiting ${m.vmm.id}`
    case 'resend-report': return `resend-report ${m.vmm.id} (${m.recordedGeneration} → ${m.vmm.generation})`
    case 'report-waiting': return `report-waiting ${m.vmm.id}`
    case 'ask-if-gone': return `ask-if-gone ${m.vmm.id}`
    case 'reap-stray': return `reap-stray ${m.stray.pid}`
    case 'stray-waiting': return `stray-waiting ${m.stray.pid}`
    case 'remove-tap': return `remove-tap ${m.tap.name}`
    case 'remove-segment': return `remove-segment ${m.segment.vni}`
    case 'push-policy': return `push-policy ${m.vmm.id} (generation ${m.policy.generation})`
  }
}

describe('hostMends', () => {
  const cases: Array<{
    name: string, vmms?: VmmView[], known?: Array<[string, KnownVmm]>, policies?: Array<[string, VmmPolicy]>, strays?: StrayView[], taps?: TapView[], segments?: SegmentView[], mends: string[]
  }> = [
    { name: 'host and record agree: nothing', vmms: [view('a', 'running', 3)], known: [known('a', 'running', 3)], mends: [] },
    { name: 'a live VMM nobody knows is an orphan', vmms: [view('a', 'running', 3)], mends: ['reap-orphan a: unknown to the control plane'] },
    { name: 'a young orphan waits: a start in flight may still record it', vmms: [view('a', 'starting', 1, YOUNG)], mends: ['orphan-waiting a'] },
    { name: 'a live VMM recorded gone is an orphan', vmms: [view('a', 'running', 5)], known: [known('a', 'destroyed', 4)], mends: ['reap-orphan a: recorded destroyed'] },
    { name: 'a live VMM of a destroyed instance is an orphan', vmms: [view('a', 'running', 3)], known: [known('a', 'running', 3, { instanceDestroyed: true })], mends: ['reap-orphan a: its instance is destroyed'] },
    { name: 'an ended VMM nobody knows is nothing to reap', vmms: [view('a', 'destroyed', 4)], mends: [] },
    { name: 'the agent ahead of PostgreSQL: its report is sent again', vmms: [view('a', 'running', 5)], known: [known('a', 'running', 3)], mends: ['resend-report a (3 → 5)'] },
    {
      name: 'the agent ahead of PostgreSQL by a change of a moment ago: its answer or its outbox is carrying it',
      vmms: [view('a', 'starting', 1, YOUNG), view('b', 'running', 5, OLD, YOUNG)],
      known: [known('a', 'starting', 0, { createdAt: YOUNG }), known('b', 'running', 4)],
      mends: ['report-waiting a', 'report-waiting b']
    },
    { name: 'PostgreSQL ahead of the agent: nothing', vmms: [view('a', 'running', 3)], known: [known('a', 'stopping', 4)], mends: [] },
    { name: 'a VMM recorded live the inventory lacks: ask the agent about it', known: [known('a', 'running', 3)], mends: ['ask-if-gone a'] },
    { name: 'one never reported is its start’s to settle', known: [known('a', 'starting', 0)], mends: [] },
    { name: 'one placed a moment ago is left alone', known: [known('a', 'running', 2, { createdAt: YOUNG })], mends: [] },
    { name: 'one recorded gone is nothing to ask about', known: [known('a', 'failed', 3)], mends: [] },
    { name: 'strays are reaped once old', strays: [stray(10, OLD), stray(11, YOUNG)], mends: ['reap-stray 10', 'stray-waiting 11'] },
    { name: 'a TAP no live VMM has is removed', taps: [tap('vmp000000000001', null), tap('vmp000000000002', 'a')], mends: ['remove-tap vmp000000000001'] },
    {
      name: 'a segment no live VMM has a TAP on is removed, after its TAPs',
      taps: [tap('vmp000000000001', null), tap('vmp000000000002', 'a'), tap('vmp000000000003', null)],
      segments: [segment(4096, ['vmp000000000001']), segment(4097, ['vmp000000000002', 'vmp000000000003']), segment(4098, [])],
      mends: ['remove-tap vmp000000000001', 'remove-tap vmp000000000003', 'remove-segment 4096', 'remove-segment 4098']
    },
    { name: 'a segment a live VMM routes to stays, TAP or not', segments: [segment(4096, [], true)], mends: [] },
    {
      name: 'a live VMM enforcing other rules than its instance has now is sent them; the same rules at an older generation are left',
      vmms: [view('a', 'running', 3, OLD, OLD, policy(4, ['10.1.0.0/24'])), view('b', 'running', 3, OLD, OLD, policy(2, [])), view('c', 'running', 3), view('d', 'running', 3, OLD, OLD, policy(4, []))],
      known: [known('a', 'running', 3), known('b', 'running', 3), known('c', 'running', 3), known('d', 'running', 3)],
      policies: [['i-a', policy(7, [])], ['i-b', policy(7, [])], ['i-c', policy(7, ['10.2.0.5/32'])], ['i-d', policy(7, ['10.1.0.0/24'])]],
      mends: ['push-policy a (generation 7)', 'push-policy c (generation 7)', 'push-policy d (generation 7)']
    },
    { name: 'an ended VMM is sent no policy', vmms: [view('a', 'destroyed', 4)], policies: [['i-a', policy(7, ['10.1.0.0/24'])]], mends: [] },
    {
      name: 'all at once, in order: VMMs, then records, then strays, then TAPs',
      vmms: [view('a', 'running', 3), view('b', 'running', 7)],
      known: [known('b', 'running', 6), known('c', 'running', 2)],
      strays: [stray(10, OLD)],
      taps: [tap('vmp000000000001', null)],
      mends: ['reap-orphan a: unknown to the control plane', 'resend-report b (6 → 7)', 'ask-if-gone c', 'reap-stray 10', 'remove-tap vmp000000000001']
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const mends = hostMends({ vmms: c.vmms ?? [], strays: c.strays ?? [], taps: c.taps ?? [], segments: c.segments ?? [] }, new Map(c.known ?? []), new Map(c.policies ?? []), clock)
      assert.deepEqual(mends.map(said), c.mends)
    })
  }
})

describe('storageOrphans', () => {
  const file = (modifiedAt: string) => ({ modifiedAt, sizeBytes: 1 })
  it('finds disks no live row names, seeds of instances not live and half-made files; young ones wait', () => {
    const listing = {
      disks: [{ ...file(OLD), diskId: 'd-live' }, { ...file(OLD), diskId: 'd-gone' }, { ...file(YOUNG), diskId: 'd-new' }],
      seeds: [{ ...file(OLD), instanceId: 'i-live' }, { ...file(OLD), instanceId: 'i-gone' }],
      partial: [{ ...file(OLD), name: 'host-1.x' }]
    } as unknown as Parameters<typeof storageOrphans>[0]
    const orphans = storageOrphans(listing, { disks: new Set(['d-live']), instances: new Set(['i-live']) }, clock)
    assert.deepEqual(orphans.map((o) => `${o.kind}/${o.name}${o.waiting ? ' (waiting)' : ''}: ${o.why}`), [
      'disks/d-gone: no live disk is recorded with its ID',
      'disks/d-new (waiting): no live disk is recorded with its ID',
      'seeds/i-gone: its instance is not live',
      'partial/host-1.x: left half-made'
    ])
  })
})
