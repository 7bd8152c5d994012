/**
 * The Temporal client. The connection is lazy, so the API starts and answers (with `/readyz`
 * saying why it is not ready) even while Temporal is down.
 */
import { Client, Connection } from '@temporalio/client'
import fp from 'fastify-plugin'
import type { TemporalConfig } from '../../config/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    temporal: Client
    temporalConfig: TemporalConfig
  }
}

export default fp<{ temporal: TemporalConfig }>(async (fastify, opts) => {
  const connection = Connection.lazy({ address: opts.temporal.address })
  fastify.decorate('temporal', new Client({ connection, namespace: opts.temporal.namespace }))
  fastify.decorate('temporalConfig', opts.temporal)
  fastify.addHook('onClose', async () => { await connection.close() })
}, { name: 'temporal' })
