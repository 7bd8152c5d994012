/**
 * `node dist/bin/migrate.js`: applies pending schema migrations to DATABASE_URL and exits.
 * The dev stack runs migrations itself; deployments run this once before the API and workers.
 */
import { migrate } from '../db/migrate.js'

const databaseUrl = process.env.DATABASE_URL
if (databaseUrl === undefined || databaseUrl === '') {
  console.error('migrate: DATABASE_URL is not set')
  process.exit(2)
}
const { from, to } = await migrate(databaseUrl)
console.log(from === to ? `schema is at version ${to}` : `migrated schema from version ${from} to ${to}`)
