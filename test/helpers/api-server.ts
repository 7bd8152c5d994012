/**
 * The API in process, for `inject` tests: the server exactly as `vmplane api` builds it
 * (api/server.ts) over a real PostgreSQL of its own (helpers/database.ts), with a Temporal
 * address nobody listens on. The Temporal client is lazy, so what these tests send (requests the
 * API must refuse, and its document) never needs Temporal. Call `stop()` in an `after` hook.
 */
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { apiConfig } from '../../config/index.js'
import { buildServer } from '../../api/server.js'
import { startDatabase, type TestDatabase } from './database.js'

export const OPERATOR_TOKEN = 'operator-token-for-inject-tests'
export const VIEWER_TOKEN = 'viewer-token-for-inject-tests'

export interface InProcessApi {
  server: FastifyInstance
  database: TestDatabase
  stop: () => Promise<void>
}

export interface InProcessApiOptions {
  /** Another API's database, shared as replicas share theirs; it stays up when this API stops. */
  database?: TestDatabase
  /** More settings (VMPLANE_API_RATE_LIMIT, say). */
  env?: Record<string, string>
}

export async function startInProcessApi (options: InProcessApiOptions = {}): Promise<InProcessApi> {
  const database = options.database ?? await startDatabase()
  const config = apiConfig({
    DATABASE_URL: database.databaseUrl,
    VMPLANE_API_TOKEN: OPERATOR_TOKEN,
    VMPLANE_API_VIEWER_TOKEN: VIEWER_TOKEN,
    VMPLANE_TEMPORAL_ADDRESS: '127.0.0.1:1',
    ...options.env
  })
  const server = await buildServer(config, pino({ level: 'silent' }))
  await server.ready()
  return {
    server,
    database,
    async stop () {
      await server.close()
      if (options.database === undefined) await database.stop()
    }
  }
}
