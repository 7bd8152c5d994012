/**
 * The cluster shape's Temporal databases in the stack's PostgreSQL: `temporal` (persistence) and
 * `temporal_visibility`, owned by a role of their own, with the server's schemas at the version
 * of the server that runs on them.
 *
 * Made and updated by `temporal-sql-tool`, the server's own tool, as a deployment's schema job
 * does (docker-compose.yml's temporal-schema job runs the same commands): `setup-schema -v 0.0`
 * creates the version table, `update-schema` applies every versioned step the database has not
 * had yet from the schemas embedded in the tool. Both are no-ops on a database at version, so
 * every start runs them: a first start creates the schemas, a later one finds them, and one
 * after an upgrade of the pinned server updates them.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { temporalSchemaVersion } from '../db/server-admin.js'
import { ensureOwnedDatabases, withDatabase, type PostgresServer } from './postgres.js'

const execFileAsync = promisify(execFile)

/** The role the server connects as. */
export const TEMPORAL_DB_ROLE = 'temporal'
/** The plugin for PostgreSQL 12 and later, in the server's configuration and the tool's. */
export const SQL_PLUGIN = 'postgres12'

export const TEMPORAL_DATABASES = {
  persistence: { name: 'temporal', schema: 'postgresql/v12/temporal' },
  visibility: { name: 'temporal_visibility', schema: 'postgresql/v12/visibility' }
} as const

/** Makes the databases and brings their schemas to version; says where each one is. */
export async function ensureTemporalSchemas (server: PostgresServer, sqlTool: string, password: string): Promise<string[]> {
  const databases = Object.values(TEMPORAL_DATABASES)
  await ensureOwnedDatabases(server, TEMPORAL_DB_ROLE, password, databases.map((database) => database.name))
  return await Promise.all(databases.map(async ({ name, schema }) => {
    const before = await schemaVersion(server, name)
    const env = {
      ...process.env,
      SQL_PLUGIN,
      SQL_HOST: '127.0.0.1',
      SQL_PORT: String(server.port),
      SQL_USER: TEMPORAL_DB_ROLE,
      SQL_PASSWORD: password,
      SQL_DATABASE: name
    }
    await runSqlTool(sqlTool, ['setup-schema', '-v', '0.0'], env)
    await runSqlTool(sqlTool, ['update-schema', '--schema-name', schema], env)
    const after = await schemaVersion(server, name)
    return before === after ? `${name} at schema version ${after}` : `${name} updated from schema version ${before ?? 'none'} to ${after}`
  }))
}

async function runSqlTool (sqlTool: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await execFileAsync(sqlTool, args, { env, maxBuffer: 16 * 1024 * 1024 })
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string, stderr?: string }
    throw new Error(`temporal-sql-tool ${args.join(' ')} on ${env.SQL_DATABASE} failed:\n${stdout ?? ''}${stderr ?? ''}`, { cause: error })
  }
}

/** The version the tool recorded in the database (`schema_version`), or null before the first setup. */
async function schemaVersion (server: PostgresServer, database: string): Promise<string | null> {
  return await withDatabase(server, database, temporalSchemaVersion)
}
