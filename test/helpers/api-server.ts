/**
 * The API in process, for `inject` tests: the server exactly as `vmplane api` builds it
 * (api/server.ts) over a real PostgreSQL of its own (helpers/database.ts), with a Temporal
 * address nobody listens on. The Temporal client is lazy, so what these tests send (requests the
 * API must refuse, and its document) never needs Temporal; tests of what the API accepts give it
 * a `TemporalStub` (helpers/temporal-stub.ts), which answers in Temporal's place and records what
 * the API asked. Call `stop()` in an `after` hook.
 */
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { apiConfig } from '../../config/index.js'
import { buildServer } from '../../api/server.js'
import { startDatabase, type TestDatabase } from './database.js'
import type { TemporalStub } from './temporal-stub.js'

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
  /** Answers in Temporal's place: the API's starts and signals go to it. */
  temporal?: TemporalStub
}

export async function startInProcessApi (options: InProcessApiOptions = {}): Promise<InProcessApi> {
  const database = options.database ?? await startDatabase()
  let server: InProcessApi['server']
  try {
    server = await startServer(database.databaseUrl, options)
  } catch (error) {
    // A database this call started is stopped with the failure, never left running behind it.
    if (options.database === undefined) await database.stop()
    throw error
  }
  return {
    server,
    database,
    async stop () {
      await server.close()
      if (options.database === undefined) await database.stop()
    }
  }
}

async function startServer (databaseUrl: string, options: InProcessApiOptions): Promise<InProcessApi['server']> {
  const config = apiConfig({
    DATABASE_URL: databaseUrl,
    VMPLANE_API_TOKEN: OPERATOR_TOKEN,
    VMPLANE_API_VIEWER_TOKEN: VIEWER_TOKEN,
    VMPLANE_TEMPORAL_ADDRESS: '127.0.0.1:1',
    ...options.env
  })
  const server = await buildServer(config, pino({ level: 'silent' }))
  const stub = options.temporal
  // The client is a decorator of the app's own context, which the root does not see: the stub is
  // installed on it as requests reach the routes that hold it.
  if (stub !== undefined) server.addHook('onRequest', async (request) => { stub.install(request.server.temporal) })
  await server.ready()
  return server
}
