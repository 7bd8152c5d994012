/**
 * The dev stack's readiness (stack/readiness.ts), against a stand-in API: the stack is ready only
 * once every host has announced the images the stack gave it, so that a create from one of them
 * is accepted the moment the stack says it is ready (not answered 422 "no host has an image named
 * debian-12.qcow2").
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import { after, before, describe, it } from 'node:test'
import { unreadyParts } from '../../../stack/readiness.js'

const HOST = {
  id: 'host-1',
  agentUrl: 'http://198.18.0.10:7301',
  status: 'active',
  statusSince: '2026-11-27T00:00:00.000Z',
  lastHeartbeatAt: '2026-11-27T00:00:01.000Z',
  contactFailingSince: null,
  capacity: { vcpus: 16, memoryMiB: 8192 },
  reserved: { vcpus: 0, memoryMiB: 0 },
  liveVmms: 0,
  lost: null,
  lease: { state: 'held', grantedAt: '2026-11-27T00:00:01.000Z', heldUntil: '2026-11-27T00:00:08.000Z', fencedBy: null },
  cordonedAt: null,
  drain: null
}
const IMAGE = { name: 'debian-12.qcow2', format: 'qcow2', virtualSizeBytes: 2 * 1024 ** 3, sha256: 'a'.repeat(64) }

describe("the dev stack's readiness", () => {
  /** What GET /v1/images answers: which hosts have announced debian-12.qcow2. */
  let imageHosts: string[] = []
  let server: Server
  let url: string

  before(async () => {
    server = createServer((request, response) => {
      const body = request.url === '/v1/hosts'
        ? { items: [HOST] }
        : request.url === '/v1/images'
          ? { items: imageHosts.length === 0 ? [] : [{ ...IMAGE, hosts: imageHosts }] }
          : { status: 'ok' }
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const address = server.address()
    assert.ok(address !== null && typeof address === 'object')
    url = `http://127.0.0.1:${address.port}`
  })
  after(() => { server.close() })

  function targets () {
    // The host agent's /healthz is the stand-in's too.
    const host = { id: HOST.id, url, images: [IMAGE.name] }
    return { apiUrl: url, apiUrls: [url], apiToken: 'viewer-token-of-the-test', hosts: [host] }
  }

  it('is not ready while an active host has not announced the images it was given', async () => {
    imageHosts = []
    const unready = await unreadyParts(targets())
    assert.equal(unready.length, 1, `unready: ${unready.join('; ')}`)
    assert.match(unready[0]!, /host-1.*debian-12\.qcow2/)
  })

  it('is ready once every host has announced them', async () => {
    imageHosts = [HOST.id]
    assert.deepEqual(await unreadyParts(targets()), [])
  })
})
