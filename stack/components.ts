/**
 * The control plane's own processes, as the stack runs them: the worker, one host agent per
 * simulated (or real) host, and the API. Each is `node <entry>.js` with the environment its
 * section of config/index.ts reads. An agent runs inside its host's network namespace (`ip netns
 * exec`, which execs, so the PID is node's) on its host's address on the stack's LAN
 * (stack-lan.ts): it makes its TAPs and starts its VMMs in the namespace it is in, as an agent on
 * a real host does, and reaches Temporal across the LAN.
 */
import { access } from 'node:fs/promises'
import { join } from 'node:path'
import type { StackConfig } from './config.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import type { StackPaths } from './data-dir.js'
import { HOST_UPLINK, hostNetworkName } from './host-network.js'
import type { Hypervisor } from './hypervisor.js'
import { hostAddress, type StackLan } from './stack-lan.js'
import type { ComponentSpec } from './supervisor.js'

export interface ComponentContext {
  config: StackConfig
  /** The environment every component shares: inherited, plus Temporal's address and pretty logs. */
  env: NodeJS.ProcessEnv
  databaseUrl: string
  apiToken: string
  viewerToken: string
  agentToken: string
}

export interface HostPlan {
  id: string
  /** The agent's component name: its log file and PID file. */
  component: string
  /** The host watchdog's component name, when the host keeps a lease. */
  watchdogComponent: string
  port: number
  /** The host's address on the stack's LAN, which its agent listens on. */
  address: string
  url: string
  stateDir: string
  imageDir: string
  /** The shared storage directory (the same for every host). */
  storageDir: string
  /** The host's network namespace (host-network.ts). */
  netns: string
  /** Where the host's watchdog listens for its agent's pets (host-agent/watchdog/). */
  watchdogSocket: string
}

/**
 * One of the stack's API or worker processes. The first keeps the plain name (`api`, `worker`);
 * the others are numbered from 2 (`api-2`, `worker-2`, …).
 */
export interface Replica {
  /** Its component name: its log file and PID file. */
  component: string
  /** The API's port, or the worker's metrics port. */
  port: number
  /** The API's base URL, or the worker's metrics URL. */
  url: string
}

/** Each component bundled (scripts/build/bundle-entry-points.mjs). */
export const WORKER_ENTRY = join(REPO_ROOT, 'dist', 'bundle', 'worker.js')
export const AGENT_ENTRY = join(REPO_ROOT, 'dist', 'bundle', 'agent.js')
const API_ENTRY = join(REPO_ROOT, 'dist', 'bundle', 'api.js')
export const WATCHDOG_ENTRY = join(REPO_ROOT, 'dist', 'bundle', 'host-watchdog.js')
const ENTRY_POINTS = [WORKER_ENTRY, AGENT_ENTRY, API_ENTRY, WATCHDOG_ENTRY]

/** Fails with a clear message when a component has not been built. */
export async function checkEntryPoints (): Promise<void> {
  for (const entry of ENTRY_POINTS) {
    await access(entry).catch(() => {
      throw new Error(`${entry} is missing: build the project first (npm run build)`)
    })
  }
}

export function planHosts (config: StackConfig, paths: StackPaths, lan: StackLan): HostPlan[] {
  return Array.from({ length: config.hosts }, (_, i) => {
    const id = `host-${i + 1}`
    const port = config.agentBasePort + i
    const address = hostAddress(lan, i)
    return {
      id,
      component: `agent-${id}`,
      watchdogComponent: `watchdog-${id}`,
      port,
      address,
      url: `http://${address}:${port}`,
      ...paths.host(id),
      storageDir: paths.storageDir,
      netns: hostNetworkName(paths.dataDir, id)
    }
  })
}

export function apiUrl (config: StackConfig): string {
  return `http://127.0.0.1:${config.apiPort}`
}

/** The APIs: one listens on the API port itself; more sit behind HAProxy there, on the ports after it. */
export function planApiReplicas (config: StackConfig): Replica[] {
  const firstPort = config.apiReplicas === 1 ? config.apiPort : config.apiPort + 1
  return replicas('api', config.apiReplicas, firstPort, (port) => `http://127.0.0.1:${port}`)
}

/** The workers, each serving its metrics on a port of its own from the worker metrics port on. */
export function planWorkerReplicas (config: StackConfig): Replica[] {
  return replicas('worker', config.workerReplicas, config.workerMetricsPort, (port) => `http://127.0.0.1:${port}/metrics`)
}

function replicas (kind: string, count: number, firstPort: number, url: (port: number) => string): Replica[] {
  return Array.from({ length: count }, (_, i) => ({
    component: i === 0 ? kind : `${kind}-${i + 1}`,
    port: firstPort + i,
    url: url(firstPort + i)
  }))
}

export function workerSpec (context: ComponentContext, worker: Replica): ComponentSpec {
  return node(worker.component, WORKER_ENTRY, {
    ...context.env,
    DATABASE_URL: context.databaseUrl,
    VMPLANE_AGENT_TOKEN: context.agentToken,
    VMPLANE_WORKER_METRICS_HOST: '127.0.0.1',
    VMPLANE_WORKER_METRICS_PORT: String(worker.port)
  })
}

export function agentSpec (context: ComponentContext, host: HostPlan, hypervisor: Hypervisor, lan: StackLan): ComponentSpec {
  const spec = node(host.component, AGENT_ENTRY, {
    ...context.env,
    // Temporal listens on the root namespace's loopback; the LAN's gateway forwards to it.
    VMPLANE_TEMPORAL_ADDRESS: `${lan.gateway}:${context.config.temporalPort}`,
    VMPLANE_HOST_ID: host.id,
    VMPLANE_AGENT_HOST: host.address,
    VMPLANE_AGENT_PORT: String(host.port),
    VMPLANE_AGENT_STATE_DIR: host.stateDir,
    VMPLANE_IMAGE_DIR: host.imageDir,
    VMPLANE_STORAGE_DIR: host.storageDir,
    VMPLANE_AGENT_UNDERLAY: HOST_UPLINK,
    VMPLANE_AGENT_TOKEN: context.agentToken,
    VMPLANE_CLOUD_HYPERVISOR: hypervisor.binary,
    // The API (or its HAProxy) listens on the root namespace's loopback too; the lease is renewed there.
    ...(context.config.hostLeases ? { VMPLANE_AGENT_WATCHDOG: `unix:${host.watchdogSocket}`, VMPLANE_API_URL: `http://${lan.gateway}:${context.config.apiPort}` } : {})
  })
  return inHostNamespace(host, spec)
}

/**
 * The host's watchdog (host-agent/watchdog/), in the host's namespace beside its agent: what
 * `/dev/watchdog` is to a real host. Its timeout is `VMPLANE_HOST_WATCHDOG_SECONDS`, which the
 * agent announces and the worker counts on (docs/design.md §17).
 */
export function watchdogSpec (context: ComponentContext, host: HostPlan): ComponentSpec {
  return inHostNamespace(host, node(host.watchdogComponent, WATCHDOG_ENTRY, {
    ...context.env,
    VMPLANE_HOST_ID: host.id,
    VMPLANE_AGENT_STATE_DIR: host.stateDir,
    VMPLANE_WATCHDOG_SOCKET: host.watchdogSocket
  }))
}

/** Runs the component inside the host's network namespace, as on a machine of its own. */
function inHostNamespace (host: HostPlan, spec: ComponentSpec): ComponentSpec {
  return { ...spec, command: 'ip', args: ['netns', 'exec', host.netns, spec.command, ...spec.args] }
}

export function apiSpec (context: ComponentContext, api: Replica): ComponentSpec {
  return node(api.component, API_ENTRY, {
    ...context.env,
    VMPLANE_API_HOST: '127.0.0.1',
    VMPLANE_API_PORT: String(api.port),
    VMPLANE_API_TOKEN: context.apiToken,
    VMPLANE_API_VIEWER_TOKEN: context.viewerToken,
    VMPLANE_AGENT_TOKEN: context.agentToken,
    DATABASE_URL: context.databaseUrl
  })
}

function node (name: string, entry: string, env: NodeJS.ProcessEnv): ComponentSpec {
  return { name, command: process.execPath, args: [entry], env }
}
