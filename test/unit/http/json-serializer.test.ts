/**
 * http/json-serializer.ts: responses written from zod schemas by fast-json-stringify.
 */
import assert from 'node:assert/strict'
import { describe, it, mock } from 'node:test'
import { z } from 'zod'
import { jsonSerializerCompiler } from '../../../http/json-serializer.js'

describe('the JSON serializer', () => {
  it('writes a union whose branch has a CIDR address, and compiles it without a warning', () => {
    const warn = mock.method(console, 'warn', () => {})
    try {
      const schema = z.object({
        devices: z.array(z.union([
          z.object({ kind: z.literal('nic'), address: z.cidrv4() }),
          z.object({ kind: z.literal('disk'), sizeGiB: z.number() })
        ]))
      })
      const write = jsonSerializerCompiler({ schema, method: 'GET', url: '/', httpStatus: '200' })
      const body = { devices: [{ kind: 'nic', address: '10.77.0.5/16' }, { kind: 'disk', sizeGiB: 3 }] }
      assert.deepEqual(JSON.parse(write(body)), body)
      assert.deepEqual(warn.mock.calls.map((call) => call.arguments.join(' ')), [])
    } finally {
      warn.mock.restore()
    }
  })

  it('compiles a schema once, for every route and status it answers for', () => {
    const schema = z.object({ title: z.string(), status: z.number() })
    const first = jsonSerializerCompiler({ schema, method: 'GET', url: '/a', httpStatus: '404' })
    const again = jsonSerializerCompiler({ schema, method: 'POST', url: '/b', httpStatus: '409' })
    assert.equal(again, first)
    const other = jsonSerializerCompiler({ schema: z.object({ title: z.string() }), method: 'GET', url: '/a', httpStatus: '404' })
    assert.notEqual(other, first)
    assert.equal(first({ title: 'Not Found', status: 404, extra: true }), '{"title":"Not Found","status":404}')
  })
})
