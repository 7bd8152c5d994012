/**
 * Brings the schema up to date with the SQL files in `db/migrations` (postgrator).
 *
 * Postgrator has no lock of its own, so the run holds a PostgreSQL advisory lock: replicas that
 * start together migrate one after the other, and the later ones find nothing to do.
 */
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import Postgrator from 'postgrator'

const MIGRATIONS = fileURLToPath(new URL('../../db/migrations/*.sql', import.meta.url))
const MIGRATION_LOCK_KEY = 7_316_001

export async function migrate (databaseUrl: string): Promise<{ from: number, to: number }> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY])
    const postgrator = new Postgrator({
      migrationPattern: MIGRATIONS,
      driver: 'pg',
      schemaTable: 'schema_migrations',
      execQuery: (query) => client.query(query)
    })
    const from = await postgrator.getDatabaseVersion()
    await postgrator.migrate()
    const to = await postgrator.getDatabaseVersion()
    return { from, to }
  } finally {
    await client.end()
  }
}
