/**
 * Addresses a create is given when it names none (db/instances.ts `lowestFreeAddress`): the
 * network's lowest host address that is neither its gateway nor held by a live interface, a
 * released one given again, none past the last host address. The API runs in process over a real
 * PostgreSQL with a stub in Temporal's place.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { OPERATOR_TOKEN, startInProcessApi, type InProcessApi } from '../helpers/api-server.js'
import { TemporalStub } from '../helpers/temporal-stub.js'

const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` }

describe('an address given by the network', { timeout: 2 * 60_000 }, () => {
  let api: InProcessApi
  let created = 0
  before(async () => {
    api = await startInProcessApi({ temporal: new TemporalStub() })
    // A /29: host addresses .1 to .6, the gateway in the middle at .3.
    await api.database.pool.query("INSERT INTO networks (id, project_id, name, cidr, gateway) VALUES ($1, (SELECT id FROM projects WHERE name = 'default'), 'small', '10.20.0.0/29', '10.20.0.3')", [randomUUID()])
  })
  after(async () => { await api?.stop() })

  /** Creates an instance on `small`, with `ip` or none; the address it got, or the answer's status. */
  async function create (ip?: string): Promise<string | number> {
    const response = await api.server.inject({
      method: 'POST',
      url: '/v1/instances',
      headers: auth,
      payload: { name: `addr-${++created}`, vcpus: 1, memoryMiB: 256, start: false, boot: { kernel: 'vmlinux' }, interfaces: [{ network: 'small', ...(ip === undefined ? {} : { ip }) }] }
    })
    if (response.statusCode !== 202) return response.statusCode
    return (response.json() as { instance: { interfaces: Array<{ ip: string }> } }).instance.interfaces[0]!.ip
  }

  it('is the lowest one free, past the gateway, a released one again, and none once all are taken', async () => {
    assert.deepEqual([await create(), await create(), await create()], ['10.20.0.1', '10.20.0.2', '10.20.0.4'])
    assert.equal(await create('10.20.0.6'), '10.20.0.6')
    assert.equal(await create(), '10.20.0.5', 'the gap below a named address')
    await api.database.pool.query("UPDATE interfaces SET released_at = now() WHERE ip = '10.20.0.2'")
    assert.equal(await create(), '10.20.0.2', 'a released address is free again')
    assert.equal(await create(), 409, 'no free address: the broadcast address is never given')
  })
})
