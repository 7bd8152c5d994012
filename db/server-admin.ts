/**
 * Statements on a PostgreSQL server rather than on vmplane's tables: the roles and databases the
 * dev stack makes on the server it runs (stack/postgres.ts), and the version Temporal's schema
 * tool records in its own databases (stack/temporal-schemas.ts). They are here because every SQL
 * statement of the product is in db/ (docs/design.md §9); the callers bring the connection, made
 * as the server's superuser.
 */
import type pg from 'pg'

/** Creates the database unless it exists, owned by `owner` when one is named. */
export async function createDatabaseUnlessExists (client: pg.ClientBase, database: string, owner?: string): Promise<void> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])
  if (rowCount !== 0) return
  const ownedBy = owner === undefined ? '' : ` OWNER ${client.escapeIdentifier(owner)}`
  await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}${ownedBy}`)
}

/** A role that logs in with `password`: created, or its password set again if it exists. */
export async function ensureLoginRole (client: pg.ClientBase, role: string, password: string): Promise<void> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role])
  // A utility statement takes no parameters: the password goes in as a quoted literal.
  await client.query(`${rowCount === 0 ? 'CREATE' : 'ALTER'} ROLE ${client.escapeIdentifier(role)} LOGIN PASSWORD ${client.escapeLiteral(password)}`)
}

/**
 * The schema version `temporal-sql-tool` recorded in the database the client is connected to
 * (its `schema_version` table, under that database's name), or null before its first setup.
 */
export async function temporalSchemaVersion (client: pg.ClientBase): Promise<string | null> {
  const { rows: [table] } = await client.query<{ present: boolean }>("SELECT to_regclass('schema_version') IS NOT NULL AS present")
  if (table?.present !== true) return null
  const { rows } = await client.query<{ curr_version: string }>(
    'SELECT curr_version FROM schema_version WHERE version_partition = 0 AND db_name = current_database()')
  return rows[0]?.curr_version ?? null
}
