/**
 * The stack's cluster shape (`VMPLANE_TEMPORAL=cluster`): Temporal's own server, the binary a
 * deployment runs (docker-compose.yml's image holds the same version), persisted in the stack's
 * PostgreSQL instead of the dev server's SQLite file. vmplane is run and tested on what it meets
 * in production: a persistence store that can restart under the server, several history shards, four
 * services that find each other through membership.
 *
 * All four services (frontend, history, matching, worker) run in one `temporal-server` process,
 * the supervised component `temporal`, so the stack's tests that kill Temporal kill all of it.
 * Its configuration is generated into `<data dir>/temporal/config/cluster.yaml` on every start
 * (the ports are the stack's settings and may change between starts): persistence and
 * visibility on the `postgres12` plugin (temporal-schemas.ts made the databases), 16 history
 * shards (fixed once a database has them), every port on 127.0.0.1, and
 * config/temporal-dynamic-config.yaml read by the server itself, as Compose's server reads it.
 *
 * Its Web UI is the UI's own server beside it (temporal-ui.ts), as Compose runs it.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { stringify } from 'yaml'
import type { StackConfig } from './config.js'
import type { StackPaths } from './data-dir.js'
import { waitForPostgres, type PostgresServer } from './postgres.js'
import type { ComponentSpec } from './supervisor.js'
import { DYNAMIC_CONFIG_FILE, temporalAddress } from './temporal.js'
import { SQL_PLUGIN, TEMPORAL_DATABASES, TEMPORAL_DB_ROLE } from './temporal-schemas.js'

/** Fixed for the life of the databases: the server refuses to start on a different count. */
export const HISTORY_SHARDS = 16
const CLUSTER_NAME = 'active'
/** How long a restart of the server waits for PostgreSQL before starting it anyway. */
const POSTGRES_WAIT_MS = 60_000

export interface ClusterSetup {
  server: string
  config: StackConfig
  paths: StackPaths
  postgres: PostgresServer
  dbPassword: string
  env: NodeJS.ProcessEnv
}

/** Writes the server's configuration and returns how to run it. */
export async function prepareClusterServer (setup: ClusterSetup): Promise<ComponentSpec> {
  const spec = await configuredComponent({
    name: 'temporal',
    command: setup.server,
    configName: 'cluster',
    config: serverConfig(setup),
    flags: ['--allow-no-auth'],
    paths: setup.paths,
    env: setup.env
  })
  // The server reads its schema's version at start and exits if PostgreSQL cannot answer.
  return {
    ...spec,
    restartsAfter: async (signal) => { await waitForPostgres(setup.postgres.adminUrl, { timeoutMs: POSTGRES_WAIT_MS, intervalMs: 200, signal }) }
  }
}

/**
 * A component of Temporal's that reads its configuration as the server does (the UI's server
 * too): `--root <temporal dir> --config config --env <name>` reads `config/<name>.yaml` there.
 * The file is written anew, mode 0600 (the server's holds the database password).
 */
export async function configuredComponent (component: {
  name: string
  command: string
  configName: string
  config: Record<string, unknown>
  flags?: string[]
  paths: StackPaths
  env: NodeJS.ProcessEnv
}): Promise<ComponentSpec> {
  const configDir = join(component.paths.temporalDir, 'config')
  await mkdir(configDir, { recursive: true })
  await writeFile(join(configDir, `${component.configName}.yaml`), stringify(component.config), { mode: 0o600 })
  return {
    name: component.name,
    command: component.command,
    args: ['--root', component.paths.temporalDir, '--config', 'config', '--env', component.configName, ...component.flags ?? [], 'start'],
    env: component.env
  }
}

/** The service ports, in the order they are taken from `temporalClusterPort` (TEMPORAL_CLUSTER_PORTS). */
function servicePorts (config: StackConfig) {
  const port = (offset: number): number => config.temporalClusterPort + offset
  return {
    frontend: { grpcPort: config.temporalPort, membershipPort: port(0), httpPort: port(1) },
    history: { grpcPort: port(2), membershipPort: port(3) },
    matching: { grpcPort: port(4), membershipPort: port(5) },
    worker: { grpcPort: port(6), membershipPort: port(7) }
  }
}

/** The shape of the server's development-postgres12.yaml, with the stack's ports and database. */
function serverConfig ({ config, postgres, dbPassword }: ClusterSetup): Record<string, unknown> {
  const datastore = (database: string, maxConns: number) => ({
    sql: {
      pluginName: SQL_PLUGIN,
      databaseName: database,
      connectAddr: `127.0.0.1:${postgres.port}`,
      connectProtocol: 'tcp',
      user: TEMPORAL_DB_ROLE,
      password: dbPassword,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h'
    }
  })
  return {
    // Warnings and errors only, as the dev server logs: its info lines are many per second at start.
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: HISTORY_SHARDS,
      datastores: {
        'postgres-default': datastore(TEMPORAL_DATABASES.persistence.name, 20),
        'postgres-visibility': datastore(TEMPORAL_DATABASES.visibility.name, 10)
      }
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      ...(config.temporalMetricsPort === null
        ? {}
        : { metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${config.temporalMetricsPort}` } } })
    },
    services: Object.fromEntries(Object.entries(servicePorts(config))
      .map(([service, ports]) => [service, { rpc: { ...ports, bindOnIP: '127.0.0.1' } }])),
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: CLUSTER_NAME,
      currentClusterName: CLUSTER_NAME,
      clusterInformation: {
        [CLUSTER_NAME]: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: temporalAddress(config) }
      }
    },
    dcRedirectionPolicy: { policy: 'noop' },
    ...(config.temporalDynamicConfig === 'tuned'
      ? { dynamicConfigClient: { filepath: DYNAMIC_CONFIG_FILE, pollInterval: '10s' } }
      : {})
  }
}
