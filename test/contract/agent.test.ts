/**
 * The host agent's contract, held by its own document (`/openapi.json`), as the API's is
 * (contract/api.test.ts): valid requests made from the document must be answered as documented,
 * never a 5xx; then hostile variations of valid requests, aimed at a running VMM, must each be
 * refused with a documented 4xx, and all together change no record of the agent's and no VMM
 * process. It prints what it sent and what came back, by route and status.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { Contract, type Operation } from '../helpers/contract/document.js'
import { RequestMaker, type RequestContext } from '../helpers/contract/requests.js'
import { ContractRun } from '../helpers/contract/send.js'
import { agentRecords } from '../helpers/contract/state.js'
import { ensureBody, TestAgent, TOKEN } from '../host-agent/helpers/agent.js'
import { buildSimulator } from '../host-agent/helpers/simulator.js'

const VALID_ROUNDS = 10
const HOSTILE_BASES = 3

describe('the host agent under requests made from its document', { timeout: 5 * 60_000 }, () => {
  let agent: TestAgent
  let contract: Contract
  before(async () => {
    await buildSimulator()
    agent = await TestAgent.create()
    await agent.start()
    contract = await Contract.of(await (await fetch(`${agent.url}/openapi.json`)).json())
  })
  after(async () => { await agent?.cleanup() })

  async function state (): Promise<unknown> {
    return { records: await agentRecords(agent.url, TOKEN), processes: (await agent.vmmProcesses()).map((p) => p.pid).sort() }
  }

  it('answers valid requests as documented, refuses every hostile one with a documented 4xx, and changes nothing for them', async () => {
    const witness = await agent.ensureRunning()
    const created: string[] = []
    let n = 0
    let ensures = 0
    let hostilePhase = false
    let picks = 0
    const pick = <T>(items: T[]): T => items[picks++ % items.length]!
    const context: RequestContext = {
      viewerToken: 'the-agent-has-no-viewer-token',
      headers: () => ({ authorization: `Bearer ${TOKEN}` }),
      pathValue: (operation, name) => {
        n++
        if (name === 'pid') return String(1000 + n)
        if (hostilePhase) return witness.id
        if (operation.method === 'PUT') return pick([randomUUID(), ...created])
        return operation.method === 'GET' ? pick([witness.id, ...created, randomUUID()]) : pick([...created, randomUUID()])
      },
      adjust: (operation, part, value) => {
        if (part !== 'body' || operation.method !== 'PUT' || operation.path !== '/v1/vmms/{id}') return value
        // A VMM the simulator can run, half of them from the agent's real images.
        const valid = ensureBody() as { spec: { boot: unknown } }
        const spec = value.spec as Record<string, unknown>
        return { ...value, spec: { ...spec, vcpus: 1, memoryMiB: 128, boot: ensures++ % 2 === 0 ? valid.spec.boot : spec.boot } }
      }
    }
    const maker = new RequestMaker(context, 16)
    const run = new ContractRun(contract, agent.url)
    await run.validRounds(maker, VALID_ROUNDS, rank, (operation, answer) => {
      if (operation.method === 'PUT' && answer.status === 201) created.push(JSON.parse(answer.body).id)
    })
    const valid = run.total
    for (const id of created) await agent.request('DELETE', `/v1/vmms/${id}`)
    await agent.waitForState(witness.id, 'running')

    hostilePhase = true
    const before = await state()
    await run.hostileVariations(maker, HOSTILE_BASES)
    const after = await state()

    console.log(`agent contract: ${run.total} requests, ${valid} valid and ${run.total - valid} hostile, over ${contract.operations.length} routes\n${run.report()}`)
    assert.deepEqual(run.breaches, [])
    assert.deepEqual(run.unreached(), [])
    assert.deepEqual(after, before, 'hostile requests changed the agent')
  })
})

/** Ensures first, deletes last, so that the requests in between have VMMs to act on. */
function rank (operation: Operation): number {
  if (operation.method === 'PUT') return 0
  return operation.method === 'DELETE' ? 2 : 1
}
