/**
 * The layout of a dev stack's data directory. Everything a stack keeps lives here, so a second
 * stack with another data directory (and other ports) runs beside it without sharing a file.
 *
 *   api-token, viewer-token, agent-token,
 *   postgres-password, temporal-db-password     secrets, generated once (mode 0600)
 *   postgres/                                   the PostgreSQL cluster (in the cluster shape, with
 *                                               Temporal's databases temporal, temporal_visibility)
 *   temporal/temporal.sqlite                    the Temporal dev server's database
 *   temporal/config/cluster.yaml, ui.yaml       the cluster shape's server and UI configurations (0600)
 *   hosts/<host>/state, hosts/<host>/images     each host agent's VMM records and images
 *   storage/                                    instances' disks and seeds, shared by every host
 *   haproxy.cfg                                 the API replicas' load balancer, written at each start
 *   logs/<component>.log                        every component's output, appended across runs
 *   run/<component>.pid, run/stack.json         what runs now; gone once the stack has stopped
 *
 * `run/stack.json` and `api-token` are where the CLI finds the stack: their paths are the CLI's
 * (cli/dev-stack-files.ts).
 */
import { join } from 'node:path'
import { apiTokenPath, stackFilePath } from '../cli/dev-stack-files.js'

export interface HostDirs {
  stateDir: string
  imageDir: string
  watchdogSocket: string
}

export function stackPaths (dataDir: string) {
  return {
    dataDir,
    apiTokenFile: apiTokenPath(dataDir),
    viewerTokenFile: join(dataDir, 'viewer-token'),
    agentTokenFile: join(dataDir, 'agent-token'),
    postgresPasswordFile: join(dataDir, 'postgres-password'),
    postgresDir: join(dataDir, 'postgres'),
    temporalDb: join(dataDir, 'temporal', 'temporal.sqlite'),
    /** The password of the PostgreSQL role the cluster shape's Temporal server connects as. */
    temporalDbPasswordFile: join(dataDir, 'temporal-db-password'),
    /** The cluster shape's server and UI read their configurations from `config/` in it (temporal-cluster.ts). */
    temporalDir: join(dataDir, 'temporal'),
    logDir: join(dataDir, 'logs'),
    runDir: join(dataDir, 'run'),
    stackFile: stackFilePath(dataDir),
    balancerConfig: join(dataDir, 'haproxy.cfg'),
    /** One storage directory for every host: the shared storage a real deployment mounts on each. */
    storageDir: join(dataDir, 'storage'),
    host (hostId: string): HostDirs {
      return {
        stateDir: join(dataDir, 'hosts', hostId, 'state'),
        imageDir: join(dataDir, 'hosts', hostId, 'images'),
        watchdogSocket: join(dataDir, 'hosts', hostId, 'watchdog.sock')
      }
    }
  }
}
export type StackPaths = ReturnType<typeof stackPaths>

export function pidFile (runDir: string, component: string): string {
  return join(runDir, `${component}.pid`)
}
