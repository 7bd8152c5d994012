/**
 * Bad input gets a 4xx and leaves every VMM untouched: no token, path escapes (`..`, absolute
 * paths, symlinks out of the image directory), missing images, oversized and malformed bodies,
 * unknown fields, bad IDs and deadlines. A 404 says whether it is the agent's answer (no record of
 * the VMM, no such stray) or a route the agent does not have, and the control plane's client
 * reads only the former as an answer (docs/design.md §5).
 */
import assert from 'node:assert/strict'
import { symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { HostAgentClient } from '../../http/host-agent-client.js'
import type { VmmView } from '../../domain/host-agent-api.js'
import { ensureBody, newVmmId, TestAgent, TOKEN } from './helpers/agent.js'
import { AGENT_BODY_LIMIT_BYTES } from '../../host-agent/http/app.js'
import { buildSimulator, processExists } from './helpers/simulator.js'

let agent: TestAgent
let witness: VmmView

before(async () => {
  await buildSimulator()
  agent = await TestAgent.create()
  await writeFile(join(agent.root, 'outside'), 'not an image\n')
  await symlink(join(agent.root, 'outside'), join(agent.imageDir, 'escape'))
  await symlink('vmlinux', join(agent.imageDir, 'alias'))
  await agent.start()
  const id = newVmmId()
  await agent.request('PUT', `/v1/vmms/${id}`, ensureBody())
  witness = await agent.waitForState(id, 'running')
})

after(async () => { await agent?.cleanup() })

function withBoot (boot: Record<string, unknown>): object {
  const body = ensureBody() as { spec: { boot: Record<string, unknown> } }
  body.spec.boot = boot
  return body
}

async function expectStatus (status: number, method: string, path: string, body?: unknown, token?: string): Promise<{ error: string, message: string }> {
  const response = await agent.request<{ error: string, message: string }>(method, path, body, token)
  assert.equal(response.status, status, `${method} ${path}: ${JSON.stringify(response.body)}`)
  assert.deepEqual(Object.keys(response.body), ['error', 'message'])
  return response.body
}

describe('authentication', () => {
  it('requires the bearer token everywhere but /healthz', async () => {
    await expectStatus(401, 'GET', '/v1/vmms', undefined, 'wrong-token-0123456789')
    await expectStatus(401, 'PUT', `/v1/vmms/${newVmmId()}`, ensureBody(), '')
    await expectStatus(401, 'DELETE', `/v1/vmms/${witness.id}`, undefined, TOKEN.slice(0, -1))
    assert.equal((await fetch(`${agent.url}/healthz`)).status, 200)
  })

  it('reads the bearer scheme in any case, as HTTP says', async () => {
    const response = await fetch(`${agent.url}/v1/vmms`, { headers: { authorization: `bearer ${TOKEN}` } })
    assert.equal(response.status, 200)
  })
  it('is, to a control plane holding another token, misconfigured and retried: never a refusal', async () => {
    const stranger = new HostAgentClient({ token: 'another-token-0123456789', timeoutMs: 5000 })
    await assert.rejects(stranger.getVmm(agent.url, witness.id), { errorClass: 'AgentMisconfigured' })
    await assert.rejects(stranger.destroyVmm(agent.url, witness.id), { errorClass: 'AgentMisconfigured' })
  })
})

describe('what a 404 says', () => {
  const client = new HostAgentClient({ token: TOKEN, timeoutMs: 5000 })
  /** A PID no process can have (Linux's `pid_max` is at most 2^22), so never a stray. */
  const NO_PID = 2 ** 22

  it('marks its own answer that it has no record of the VMM, on every route that asks about one', async () => {
    const unknown = newVmmId()
    const asked: Array<[string, string, unknown?]> = [
      ['GET', `/v1/vmms/${unknown}`],
      ['GET', `/v1/vmms/${unknown}/console/log`],
      ['POST', `/v1/vmms/${unknown}/power-button`, {}],
      ['POST', `/v1/vmms/${unknown}/reboot`],
      ['POST', `/v1/vmms/${unknown}/migration/send`, { migrationId: newVmmId(), destinationUrl: 'unix:/nowhere', downtimeMs: 300, timeoutS: 60 }],
      ['POST', `/v1/vmms/${unknown}/migration/cancel`, { migrationId: newVmmId() }],
      ['DELETE', `/v1/vmms/${newVmmId()}`]
    ]
    for (const [method, path, body] of asked) {
      assert.equal((await expectStatus(404, method, path, body)).error, 'VmmNotFound', `${method} ${path}`)
    }
    assert.equal((await expectStatus(404, 'DELETE', `/v1/strays/${NO_PID}?startTime=1`)).error, 'StrayNotFound')
  })

  it('which the client takes as the answer it is', async () => {
    assert.equal(await client.findVmm(agent.url, newVmmId()), null)
    assert.equal(await client.destroyVmm(agent.url, newVmmId()), null)
    await assert.rejects(client.rebootVmm(agent.url, newVmmId()), { errorClass: 'VmmNotFound' })
    assert.equal(await client.reapStray(agent.url, { pid: NO_PID, startTime: '1' }), false)
  })

  it('does not mark a route it does not have', async () => {
    assert.equal((await expectStatus(404, 'GET', '/v1/nothing')).error, 'Not Found')
    assert.equal((await expectStatus(404, 'DELETE', `/v2/vmms/${witness.id}`)).error, 'Not Found')
  })
})

describe('what no route reads', () => {
  it('refuses a query parameter a route does not read, a body that is not JSON, and a PID that is not digits', async () => {
    const raw = async (method: string, path: string, init: { contentType?: string, body?: string } = {}): Promise<number> => (await fetch(`${agent.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(init.contentType === undefined ? {} : { 'content-type': init.contentType }) },
      body: init.body
    })).status
    assert.equal(await raw('GET', '/v1/vmms?bogus=1'), 400)
    assert.equal(await raw('POST', `/v1/vmms/${witness.id}/reboot`, { contentType: 'text/plain', body: 'please' }), 415)
    await expectStatus(400, 'DELETE', '/v1/strays/+5?startTime=1')
    await expectStatus(400, 'DELETE', '/v1/strays/%205?startTime=1')
  })
})

describe('images', () => {
  const put = async (status: number, boot: Record<string, unknown>): Promise<string> =>
    (await expectStatus(status, 'PUT', `/v1/vmms/${newVmmId()}`, withBoot(boot))).message

  it('refuses names that escape the image directory', async () => {
    await put(400, { kernel: '../outside' })
    await put(400, { kernel: '/etc/passwd' })
    await put(400, { kernel: 'vmlinux', initramfs: 'a/../../outside' })
    assert.match(await put(400, { kernel: 'escape' }), /resolves outside the image directory/)
  })

  it('names a missing image', async () => {
    assert.match(await put(400, { kernel: 'no-such-kernel' }), /image 'no-such-kernel' not found/)
    assert.match(await put(400, { kernel: 'vmlinux', initramfs: 'nope.img' }), /image 'nope.img' not found/)
  })

  it('follows a symlink that stays inside', async () => {
    const id = newVmmId()
    assert.equal((await agent.request('PUT', `/v1/vmms/${id}`, withBoot({ kernel: 'alias' }))).status, 201)
    await agent.request('DELETE', `/v1/vmms/${id}`)
  })
})

describe('malformed and hostile requests', () => {
  it('refuses oversized bodies, overlong command lines and malformed JSON', async () => {
    await expectStatus(413, 'PUT', `/v1/vmms/${newVmmId()}`, JSON.stringify({ ...ensureBody(), pad: 'x'.repeat(AGENT_BODY_LIMIT_BYTES) }))
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, withBoot({ kernel: 'vmlinux', cmdline: 'x'.repeat(5000) }))
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, '{"instanceId": ')
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, '{"__proto__": {"admin": true}}')
  })

  it('refuses unknown fields, wrong types, out-of-range sizes and bad IDs', async () => {
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, { ...ensureBody(), extra: 1 })
    const body = ensureBody() as { spec: Record<string, unknown> }
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, { ...body, spec: { ...body.spec, vcpus: '2' } })
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, { ...body, spec: { ...body.spec, memoryMiB: 1 } })
    await expectStatus(400, 'PUT', '/v1/vmms/not-a-uuid', ensureBody())
    await expectStatus(400, 'PUT', `/v1/vmms/${newVmmId()}`, { ...ensureBody(), instanceName: 'Not A DNS Label' })
  })

  it('refuses a malformed time to the kill, a time instead of one, and a body on the reboot', async () => {
    for (const killAfterMs of ['1000', -1, 1.5, 86_400_001]) {
      await expectStatus(400, 'POST', `/v1/vmms/${witness.id}/power-button`, { killAfterMs })
    }
    await expectStatus(400, 'POST', `/v1/vmms/${witness.id}/power-button`, { killAfterMs: 1000, force: true })
    // An absolute deadline, as agents before killAfterMs took: a time on another clock is refused.
    await expectStatus(400, 'POST', `/v1/vmms/${witness.id}/power-button`, { deadline: '2030-01-01T00:00:00Z' })
    await expectStatus(400, 'POST', `/v1/vmms/${witness.id}/reboot`, { now: true })
  })

  it('answers 404 for unknown routes and 409 for operations the state forbids', async () => {
    await expectStatus(404, 'GET', '/v1/nothing')
    const id = newVmmId()
    // A boot far longer than the 2 s the agent waits for one before it answers (BOOT_ANSWER_WAIT_MS):
    // a 2 s boot raced that wait, and on a loaded machine was over, and the reboot allowed.
    await agent.request('PUT', `/v1/vmms/${id}`, ensureBody('sim.boot_ms=30000'))
    await expectStatus(409, 'POST', `/v1/vmms/${id}/reboot`)
    await agent.request('DELETE', `/v1/vmms/${id}`)
    await expectStatus(409, 'POST', `/v1/vmms/${id}/power-button`, { killAfterMs: 0 })
  })

  it('left every VMM untouched', async () => {
    const now = await agent.vmm(witness.id)
    assert.equal(now.state, 'running')
    assert.equal(now.generation, witness.generation)
    assert.ok(processExists(witness.pid!))
    const list = (await agent.request<{ items: VmmView[] }>('GET', '/v1/vmms')).body.items
    assert.deepEqual(list.filter((v) => v.state !== 'destroyed').map((v) => v.id), [witness.id])
    assert.equal((await agent.vmmProcesses()).length, 1)
  })
})
