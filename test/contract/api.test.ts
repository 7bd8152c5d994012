/**
 * The API's contract, held by its own document (issue 15). Requests are made from
 * `/openapi.json` against a real stack: valid ones first, whose answers must be documented and
 * never a 5xx; then, once the stack is at rest, hostile variations of valid requests (one thing
 * broken each, requests/ lists them), each of which must be refused with a documented 4xx, and
 * which all together must change nothing in PostgreSQL, on the agent or in the VMM processes.
 * It prints what it sent and what came back, by route and status.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { Contract, type Operation } from '../helpers/contract/document.js'
import { RequestMaker, type RequestContext } from '../helpers/contract/requests.js'
import { ContractRun } from '../helpers/contract/send.js'
import { stateOf } from '../helpers/contract/state.js'
import { newInstance, runningInstanceAtRest, waitForState, type InstanceBody } from '../helpers/instances.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'
import { checkInvariants } from '../helpers/invariants.js'
import { waitUntil } from '../../stack/wait.js'

/** Rounds of valid requests over every route, and valid requests each hostile variation is made of. */
const VALID_ROUNDS = 15
const HOSTILE_BASES = 4
const MIN_REQUESTS = 2000

describe('the API under requests made from its document', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  let contract: Contract
  before(async () => {
    stack = await startStack({ hosts: 1, env: { VMPLANE_API_RATE_LIMIT: '100000000' } })
    contract = await Contract.of(await (await fetch(`${stack.apiUrl}/openapi.json`)).json())
  })
  after(async () => { await stack?.stop() })

  it('answers valid requests as documented, refuses every hostile one with a documented 4xx, and changes nothing for them', async () => {
    const target = await runningInstanceAtRest(stack, 'contract-target')
    const created: string[] = []
    const operations: string[] = [target.operation?.id ?? randomUUID()]
    let picks = 0
    const pick = <T>(items: T[]): T => items[picks++ % items.length]!
    let n = 0
    let creates = 0
    let hostilePhase = false
    const context: RequestContext = {
      viewerToken: stack.info.viewerToken,
      headers: (operation) => ({
        authorization: `Bearer ${operation.method === 'GET' && n % 3 === 0 ? stack.info.viewerToken : stack.info.apiToken}`
      }),
      pathValue: (operation) => {
        n++
        if (operation.path.startsWith('/v1/operations/')) return pick([...operations, randomUUID()])
        // The hostile phase aims at the running instance: a request that slipped through would show.
        if (hostilePhase) return target.id
        return operation.method === 'GET' ? pick([target.id, ...created, randomUUID()]) : pick([...created, randomUUID()])
      },
      adjust: (operation, part, value) => {
        if (part === 'query') return { ...value, ...(value.wait === undefined ? {} : { wait: n % 2 }) }
        if (operation.path !== '/v1/instances') return value
        // A create that a small simulated host can run, under a name of its own, half of them booting.
        creates++
        const boot = creates % 2 === 0 ? newInstance('x').boot : value.boot
        return { ...value, name: `contract-${creates}`, vcpus: 1, memoryMiB: 256, boot, start: creates % 4 === 0 }
      }
    }
    const maker = new RequestMaker(context, 15)
    const run = new ContractRun(contract, stack.apiUrl)
    await run.validRounds(maker, VALID_ROUNDS, rank, (operation, answer) => {
      if (operation.path !== '/v1/instances' || operation.method !== 'POST' || answer.status !== 202) return
      const body = JSON.parse(answer.body) as { instance: InstanceBody }
      created.push(body.instance.id)
      if (body.instance.operation !== null) operations.push(body.instance.operation.id)
    })
    const valid = run.total
    await atRest(stack, target.id)

    hostilePhase = true
    const before = await stateOf(stack)
    await run.hostileVariations(maker, HOSTILE_BASES)
    const after = await stateOf(stack)

    console.log(`API contract: ${run.total} requests, ${valid} valid and ${run.total - valid} hostile, over ${contract.operations.length} routes\n${run.report()}`)
    assert.deepEqual(run.breaches, [])
    assert.deepEqual(run.unreached(), [])
    assert.ok(run.total >= MIN_REQUESTS, `${run.total} requests, fewer than ${MIN_REQUESTS}`)
    assert.deepEqual(after, before, 'hostile requests changed the stack')
    assert.equal((await waitForState(stack, target.id, 'running')).id, target.id)
  })
})

/** Creates first, deletes last, so that the requests in between have instances to act on. */
function rank (operation: Operation): number {
  if (operation.method === 'POST' && operation.path === '/v1/instances') return 0
  return operation.method === 'DELETE' ? 2 : 1
}

/**
 * Destroys every instance but the target, and waits until nothing is in flight, so that what the
 * hostile requests find is what stays unless one of them changes it.
 */
async function atRest (stack: TestStack, targetId: string): Promise<void> {
  const { body } = await api(stack).get<{ items: InstanceBody[] }>('/v1/instances?limit=500')
  for (const instance of body.items.filter((i) => i.id !== targetId)) {
    await api(stack).delete(`/v1/instances/${instance.id}?graceSeconds=0`)
  }
  for (const instance of body.items.filter((i) => i.id !== targetId)) await waitForState(stack, instance.id, 'destroyed', 120_000)
  await waitForState(stack, targetId, 'running')
  // An instance destroyed before the list above may still have an operation to end: a stop
  // accepted as its delete ended runs after it (workflows/halt.ts).
  await waitUntil('no operation in flight', async () => (await checkInvariants(stack.info)).operationsInFlight.length === 0, { timeoutMs: 120_000 })
}
