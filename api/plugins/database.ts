/** PostgreSQL for the API: read access to everything, plus the rows a request creates. */
import fp from 'fastify-plugin'
import { createPool, type Pool } from '../../db/pool.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Pool
  }
}

export default fp<{ databaseUrl: string }>(async (fastify, opts) => {
  const pool = createPool(opts.databaseUrl)
  fastify.decorate('db', pool)
  fastify.addHook('onClose', async () => { await pool.end() })
}, { name: 'database' })
