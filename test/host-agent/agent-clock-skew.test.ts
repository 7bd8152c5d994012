/**
 * A stop on a host whose clock is not the control plane's: the agent kills the VMM a grace
 * period after the press, by its own clock, whether that clock runs ahead or behind. Each case
 * runs a real agent under libfaketime, its clock 30 s off the test's, and presses the power
 * button as a halt does, through the worker's activity (activities/host-agent-calls.ts) with a
 * deadline on the test's clock, as the halt computes it from the API's `requestedAt`. The
 * activity finds the agent through a real PostgreSQL's hosts table. A deadline already past when
 * the call leaves is no time left: the kill comes at once, not a refusal.
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { createHostAgentCalls } from '../../activities/host-agent-calls.js'
import { HostAgentClient } from '../../http/host-agent-client.js'
import { startDatabase, type TestDatabase } from '../helpers/database.js'
import { TestAgent, TOKEN } from './helpers/agent.js'
import { buildSimulator, processExists } from './helpers/simulator.js'

const GRACE_MS = 3000
const SKEW_SECONDS = 30
/** Far more than the grace, far less than the grace plus the skew. */
const KILL_WAIT_MS = 20_000

describe("a stop's deadline, reckoned on the control plane's clock and enforced on the agent's", () => {
  let db!: TestDatabase
  const agents: TestAgent[] = []
  before(async () => {
    await buildSimulator()
    db = await startDatabase()
  })
  after(async () => {
    for (const agent of agents) await agent.cleanup()
    await db?.stop()
  })

  /** An agent registered as host `hostId`, its clock `offsetSeconds` off the test's if given. */
  async function registeredAgent (hostId: string, offsetSeconds?: number): Promise<TestAgent> {
    const agent = await TestAgent.create({ clockOffsetSeconds: offsetSeconds, env: { VMPLANE_HOST_ID: hostId } })
    agents.push(agent)
    await agent.start()
    await db.pool.query('INSERT INTO hosts (id, agent_url, vcpus, memory_mib) VALUES ($1, $2, 8, 8192)', [hostId, agent.url])
    return agent
  }

  /** The worker's activities that call agents, as the halt's press runs them. */
  function agentCalls (): ReturnType<typeof createHostAgentCalls> {
    return createHostAgentCalls({ pool: db.pool, client: new HostAgentClient({ token: TOKEN, timeoutMs: 10_000 }), unreachableAfterMs: 60_000 })
  }

  for (const [direction, offsetSeconds] of [['ahead', SKEW_SECONDS], ['behind', -SKEW_SECONDS]] as const) {
    it(`kills the VMM a grace period after the press, not at the skewed time, when the host's clock runs ${SKEW_SECONDS} s ${direction}`, async () => {
      const hostId = `host-${direction}`
      const agent = await registeredAgent(hostId, offsetSeconds)
      // The premise: the agent's clock is off by the skew (it stamps its start on its clock).
      const health = await (await fetch(`${agent.url}/healthz`)).json() as { startedAt: string }
      const agentOffsetMs = Date.parse(health.startedAt) - Date.now()
      assert.ok(Math.abs(agentOffsetMs - offsetSeconds * 1000) < SKEW_SECONDS * 1000 / 2, `the agent's clock is ${agentOffsetMs} ms off the test's`)

      const vmm = await agent.ensureRunning('sim.ignore_power_button')
      const pressed = await agentCalls().pressPowerButton({ hostId, vmmId: vmm.id, deadline: new Date(Date.now() + GRACE_MS).toISOString() })
      assert.equal(pressed.state, 'stopping')

      await sleep(1000)
      const aSecondLater = await agent.vmm(vmm.id)
      assert.equal(aSecondLater.state, 'stopping', `a second into a ${GRACE_MS} ms grace period the VMM is still stopping: ${aSecondLater.reason ?? ''}`)
      assert.ok(processExists(vmm.pid!))

      const destroyed = await agent.waitForState(vmm.id, 'destroyed', KILL_WAIT_MS)
      assert.deepEqual(destroyed.exit, { cause: 'stop-deadline', code: null, signal: 'SIGKILL' })
      assert.equal(processExists(vmm.pid!), false)
    })
  }

  it('kills at once when the deadline has passed by the time the call leaves', async () => {
    const agent = await registeredAgent('host-late')
    const vmm = await agent.ensureRunning('sim.ignore_power_button')
    const pressed = await agentCalls().pressPowerButton({ hostId: 'host-late', vmmId: vmm.id, deadline: new Date(Date.now() - 1000).toISOString() })
    assert.ok(['stopping', 'destroyed'].includes(pressed.state), `the press is taken: ${pressed.state}`)
    const destroyed = await agent.waitForState(vmm.id, 'destroyed')
    assert.deepEqual(destroyed.exit, { cause: 'stop-deadline', code: null, signal: 'SIGKILL' })
  })
})
