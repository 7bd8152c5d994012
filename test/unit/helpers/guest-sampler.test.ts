/**
 * How the guest sampler (test/helpers/guest-sampler.ts) measures doubles from its samples, on
 * made-up samples: a window from the first sample that shows an instance running twice to the
 * first that does not, and a host whose agent did not answer neither ends a double nor splits it;
 * and, on agents made of loopback servers, that one that does not answer does not hold up the
 * sampling of the others.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, describe, it } from 'node:test'
import { DoubleWindows, sampleGuests, type SampledVmm, type SamplerReport } from '../../helpers/guest-sampler.js'
import type { TestStack } from '../../helpers/stack.js'
import { waitFor } from '../../../stack/wait.js'

const INSTANCE = '00000000-0000-4000-8000-000000000001'
/** How long the sampler waits on the agent that never answers, in the test of its reads. */
const SILENT_READ_TIMEOUT_MS = 10_000
const source: SampledVmm = {
  id: '00000000-0000-4000-8000-00000000000a',
  instanceId: INSTANCE,
  hostId: 'host-1',
  state: 'running',
  migration: { id: '00000000-0000-4000-8000-0000000000f0', role: 'source', phase: 'failed', receiverUrl: null, iterations: 3, progressAt: '2026-11-26T22:00:00.000Z', reason: 'lost ack' }
}
const target: SampledVmm = {
  ...source,
  id: '00000000-0000-4000-8000-00000000000b',
  hostId: 'host-3',
  migration: { ...source.migration!, role: 'target', phase: 'finished', reason: null }
}

/** Feeds samples taken every 100 ms: each the VMMs seen running the guest, and the hosts not heard. */
function windowsOf (samples: Array<{ running: SampledVmm[], unheard?: string[] }>): DoubleWindows {
  const windows = new DoubleWindows()
  samples.forEach(({ running, unheard = [] }, n) => {
    const byInstance = new Map<string, SampledVmm[]>()
    for (const vmm of running) byInstance.set(vmm.instanceId, [...byInstance.get(vmm.instanceId) ?? [], vmm])
    windows.add({ at: n * 100, running: byInstance, unheard: new Set(unheard) })
  })
  return windows
}

const seenBy = (host: string): SampledVmm[] => [source, target].filter((vmm) => vmm.hostId !== host)

describe('the guest sampler\'s doubles', () => {
  it('measures a double from the first sample that shows it to the first that does not', () => {
    const { doubles } = windowsOf([
      { running: [source] },
      { running: [source, target] },
      { running: [source, target] },
      { running: [source, target] },
      { running: [target] }
    ])
    assert.deepEqual(doubles.map((d) => [d.startedAt, d.endedAt, d.durationMs]), [[100, 400, 300]])
  })

  it('keeps one double through samples in which the agent of one of its hosts did not answer', () => {
    const { doubles } = windowsOf([
      { running: [source, target] },
      { running: seenBy('host-3'), unheard: ['host-3'] },
      { running: seenBy('host-3'), unheard: ['host-3'] },
      { running: [source, target] },
      { running: [target] }
    ])
    assert.deepEqual(doubles.map((d) => [d.startedAt, d.endedAt, d.durationMs]), [[0, 400, 400]])
  })

  it('ends a double at the first sample its host was not heard in, when it does not show again', () => {
    const { doubles } = windowsOf([
      { running: [source, target] },
      { running: [source, target] },
      { running: seenBy('host-1'), unheard: ['host-1'] },
      { running: [target] }
    ])
    assert.deepEqual(doubles.map((d) => [d.startedAt, d.endedAt, d.durationMs]), [[0, 200, 200]])
  })

  it('ends a double as ever when only a host it has no VMM on goes unheard', () => {
    const { doubles } = windowsOf([
      { running: [source, target] },
      { running: [source], unheard: ['host-2'] }
    ])
    assert.deepEqual(doubles.map((d) => [d.startedAt, d.endedAt, d.durationMs]), [[0, 100, 100]])
  })
})

describe('the guest sampler\'s reads', () => {
  const servers: Server[] = []
  after(() => { for (const server of servers) server.closeAllConnections(); for (const server of servers) server.close() })

  /** An agent on loopback that answers every read with no VMM, or never answers; counts its reads. */
  async function agent (answers: boolean): Promise<{ url: string, reads: () => number, server: Server }> {
    let reads = 0
    const server = createServer((_request, response) => {
      reads++
      if (answers) response.writeHead(200, { 'content-type': 'application/json' }).end('{"items":[]}')
    })
    servers.push(server)
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, reads: () => reads, server }
  }

  it('goes on sampling the agents that answer while one does not', async () => {
    const [first, second, silent] = [await agent(true), await agent(true), await agent(false)]
    const stack = {
      info: { agentToken: 'token', hosts: [first, second, silent].map((host, n) => ({ id: `host-${n + 1}`, url: host.url })) }
    } as unknown as TestStack
    // The silent agent's read is given up on after 10 s, not the usual 1 s, so that a busy machine
    // that runs the sampler late still has it out while the others are read again.
    const sampler = sampleGuests(stack, 50, SILENT_READ_TIMEOUT_MS)
    let report: SamplerReport
    try {
      // Waiting for every answer made each sample wait out the silent agent: one read of each other.
      await waitFor('the answering agents read three times each while the silent one was not heard',
        async () => first.reads() >= 3 && second.reads() >= 3 ? true : null,
        { timeoutMs: SILENT_READ_TIMEOUT_MS - 1000, intervalMs: 20 })
      assert.equal(silent.reads(), 1, 'the silent agent is not asked again while its read is out')
    } finally {
      report = await sampler.stop()
    }
    assert.ok(report.skipped >= report.samples, `the silent agent is unheard in every sample: ${JSON.stringify(report)}`)
  })
})
