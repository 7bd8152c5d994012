/**
 * The dev stack's settings (`npm start`), read from the environment and validated once at its
 * start, as the product's processes read theirs (config/index.ts), with the same pieces: a bad
 * value stops the stack with one line naming the variable and the problem. Nothing of the product
 * reads these; the stack passes the product's own settings on to each component it starts
 * (components.ts). The README's settings table lists them.
 */
import { resolve } from 'node:path'
import { z } from 'zod'
import { DEFAULT_DATA_DIR } from '../cli/dev-stack-files.js'
import {
  DEFAULT_TEMPORAL_PORT, DEFAULT_WORKER_METRICS_PORT, databaseUrl, optionalToken, parseEnv, port, temporalConfig, type Env
} from '../config/index.js'

/**
 * The dev stack's API or worker processes: as many as a machine's stack has any use for. Unset,
 * the dev shape runs one of each and the cluster shape two (stackConfig).
 */
const replicas = z.coerce.number().int().min(1).max(8).optional()

/** How many API and worker processes a stack of this shape runs unless told. */
export function defaultReplicas (shape: 'dev' | 'cluster'): number {
  return shape === 'cluster' ? 2 : 1
}

/** How many ports the cluster shape's Temporal services take besides the frontend's gRPC port. */
export const TEMPORAL_CLUSTER_PORTS = 8

export function stackConfig (env: Env = process.env) {
  const s = parseEnv(
    z.object({
      VMPLANE_DATA_DIR: z.string().min(1).default(DEFAULT_DATA_DIR),
      VMPLANE_HOSTS: z.coerce.number().int().min(1).max(64).default(2),
      VMPLANE_TEMPORAL: z.enum(['dev', 'cluster']).default('dev'),
      VMPLANE_TEMPORAL_PORT: port.default(DEFAULT_TEMPORAL_PORT),
      VMPLANE_TEMPORAL_CLUSTER_PORT: z.coerce.number().int().min(1).max(65536 - TEMPORAL_CLUSTER_PORTS).optional(),
      VMPLANE_TEMPORAL_UI_PORT: port.optional(),
      VMPLANE_TEMPORAL_METRICS_PORT: port.optional(),
      VMPLANE_TEMPORAL_DYNAMIC_CONFIG: z.enum(['tuned', 'default']).default('tuned'),
      VMPLANE_PG_PORT: port.default(5433),
      VMPLANE_API_PORT: port.default(8080),
      VMPLANE_AGENT_PORT: port.default(7301),
      VMPLANE_WORKER_METRICS_PORT: port.default(DEFAULT_WORKER_METRICS_PORT),
      VMPLANE_API_REPLICAS: replicas,
      VMPLANE_WORKER_REPLICAS: replicas,
      DATABASE_URL: databaseUrl.optional(),
      TEMPORAL_CLI: z.string().min(1).optional(),
      VMPLANE_API_TOKEN: optionalToken,
      VMPLANE_API_VIEWER_TOKEN: optionalToken,
      VMPLANE_CLOUD_HYPERVISOR: z.string().min(1).optional(),
      VMPLANE_HOST_LEASES: z.enum(['0', '1']).default('0'),
      // At least the first restart's delay (supervisor.ts).
      VMPLANE_MAX_RESTART_DELAY_MS: z.coerce.number().int().min(250).max(600_000).default(10_000)
    }).refine((settings) => settings.VMPLANE_TEMPORAL === 'dev' || settings.DATABASE_URL === undefined, {
      path: ['VMPLANE_TEMPORAL'],
      message: 'cluster runs Temporal on the stack\'s own PostgreSQL: leave DATABASE_URL unset'
    }),
    env
  )
  const temporal = temporalConfig(env)
  return {
    dataDir: resolve(s.VMPLANE_DATA_DIR),
    hosts: s.VMPLANE_HOSTS,
    /**
     * `dev`: `temporal server start-dev` on SQLite, with its Web UI; `cluster`: Temporal's own
     * server on the stack's PostgreSQL (temporal-cluster.ts), as deployed.
     */
    temporalShape: s.VMPLANE_TEMPORAL,
    temporalPort: s.VMPLANE_TEMPORAL_PORT,
    /**
     * The cluster shape's other ports, TEMPORAL_CLUSTER_PORTS of them from this one: membership
     * and HTTP of the frontend, gRPC and membership of history, matching and the worker service.
     */
    temporalClusterPort: s.VMPLANE_TEMPORAL_CLUSTER_PORT ?? s.VMPLANE_TEMPORAL_PORT + 1,
    temporalUiPort: s.VMPLANE_TEMPORAL_UI_PORT ?? Math.min(s.VMPLANE_TEMPORAL_PORT + 1000, 65535),
    temporalMetricsPort: s.VMPLANE_TEMPORAL_METRICS_PORT ?? null,
    /** `tuned`: the dev server runs with config/temporal-dynamic-config.yaml; `default`: with the server's defaults. */
    temporalDynamicConfig: s.VMPLANE_TEMPORAL_DYNAMIC_CONFIG,
    namespace: temporal.namespace,
    taskQueue: temporal.taskQueue,
    pgPort: s.VMPLANE_PG_PORT,
    apiPort: s.VMPLANE_API_PORT,
    agentBasePort: s.VMPLANE_AGENT_PORT,
    workerMetricsPort: s.VMPLANE_WORKER_METRICS_PORT,
    /**
     * How many API and worker processes the stack runs: one of each on the dev shape and two on
     * the cluster shape, unless given. With more than one API, HAProxy listens on the API port and
     * replica i on the API port + i; worker i serves metrics on the worker metrics port + i - 1.
     */
    apiReplicas: s.VMPLANE_API_REPLICAS ?? defaultReplicas(s.VMPLANE_TEMPORAL),
    workerReplicas: s.VMPLANE_WORKER_REPLICAS ?? defaultReplicas(s.VMPLANE_TEMPORAL),
    databaseUrl: s.DATABASE_URL ?? null,
    temporalCli: s.TEMPORAL_CLI ?? null,
    apiToken: s.VMPLANE_API_TOKEN ?? null,
    viewerToken: s.VMPLANE_API_VIEWER_TOKEN ?? null,
    cloudHypervisor: s.VMPLANE_CLOUD_HYPERVISOR ?? null,
    /**
     * Whether each host runs a watchdog and its agent keeps a lease (docs/design.md §17). Off by
     * default: the stack's fault tests keep hosts merely unreachable for minutes (I2), which a
     * host keeping a lease ends in seconds.
     */
    hostLeases: s.VMPLANE_HOST_LEASES === '1',
    /**
     * The dev stack restarts a component that exited 250 ms later, twice as long each time it
     * exits again within 30 s, up to this. The fault tests, which kill components on purpose
     * every few seconds, keep it at 250 ms: a kill is not a crash loop.
     */
    maxRestartDelayMs: s.VMPLANE_MAX_RESTART_DELAY_MS
  }
}
export type StackConfig = ReturnType<typeof stackConfig>
