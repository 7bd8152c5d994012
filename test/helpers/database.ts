/**
 * A real PostgreSQL of its own for a test file of activities, with vmplane's schema: the dev
 * stack's server (stack/postgres.ts) in a temporary directory, nothing else. Call
 * `stop()` in an `after` hook.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrate } from '../../db/migrate.js'
import { createPool, type Pool } from '../../db/pool.js'
import { stackPaths } from '../../stack/data-dir.js'
import { freePorts } from './launcher.js'
import { ensureDatabase, preparePostgres, waitForPostgres } from '../../stack/postgres.js'

export interface TestDatabase {
  pool: Pool
  databaseUrl: string
  stop: () => Promise<void>
}

export async function startDatabase (): Promise<TestDatabase> {
  const dir = await mkdtemp(join(tmpdir(), 'vmplane-db-'))
  // The server runs as the `postgres` user when the tests run as root.
  await chmod(dir, 0o755)
  const paths = stackPaths(dir)
  const password = randomBytes(16).toString('hex')
  await writeFile(paths.postgresPasswordFile, password, { mode: 0o644 })
  const server = await preparePostgres(paths, await freePorts(1), password, process.env, () => {})
  const { command, args, uid, gid } = server.spec
  const postgres = spawn(command, args, { uid, gid, stdio: 'ignore' })
  const exited = once(postgres, 'exit')
  await waitForPostgres(server.adminUrl, { timeoutMs: 30_000, intervalMs: 100 })
  await ensureDatabase(server)
  await migrate(server.databaseUrl)
  const pool = createPool(server.databaseUrl, 4)
  return {
    pool,
    databaseUrl: server.databaseUrl,
    async stop () {
      await pool.end()
      postgres.kill('SIGINT')
      await exited
      await rm(dir, { recursive: true, force: true })
    }
  }
}

/** Inserts a host with room for a few VMMs. */
export async function insertHost (pool: Pool, hostId: string, vcpus = 8, memoryMiB = 8192): Promise<void> {
  await pool.query(
    'INSERT INTO hosts (id, agent_url, vcpus, memory_mib, last_heartbeat_at) VALUES ($1, \'http://127.0.0.1:1\', $2, $3, now())',
    [hostId, vcpus, memoryMiB]
  )
}

/** Runs `work` while every insert into `table` fails with `message`, as a failing PostgreSQL would fail it. */
export async function whileInsertsFail<T> (pool: Pool, table: string, message: string, work: () => Promise<T>): Promise<T> {
  const trigger = `refuse_${table}`
  await pool.query(`CREATE FUNCTION ${trigger} () RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN RAISE EXCEPTION USING MESSAGE = TG_ARGV[0]; END $$`)
  await pool.query(`CREATE TRIGGER ${trigger} BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${trigger}('${message.replaceAll("'", "''")}')`)
  try {
    return await work()
  } finally {
    await pool.query(`DROP TRIGGER ${trigger} ON ${table}`)
    await pool.query(`DROP FUNCTION ${trigger}()`)
  }
}
