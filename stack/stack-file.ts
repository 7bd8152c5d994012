/**
 * `run/stack.json`: written once the whole stack is ready, removed when it stops. It says where
 * everything is; the test harness waits for it and reads its URLs and tokens from it, and the CLI
 * its API's address and token: the part of it that is the CLI's contract (`PublishedStack`,
 * cli/dev-stack-files.ts), which the CLI reads with the same function.
 */
import { rename, rm, writeFile } from 'node:fs/promises'
import { readStackFile as readPublishedStack, type PublishedStack } from '../cli/dev-stack-files.js'
import type { StackLan } from './stack-lan.js'

export interface StackInfo extends PublishedStack {
  /** Each API replica's own address (with one API, `apiUrl`). */
  apiUrls: string[]
  docsUrl: string
  /** Prometheus endpoints by component: `api`, `api-2`, …, `worker`, `worker-2`, …, `agent-<host>`. */
  metricsUrls: Record<string, string>
  temporalAddress: string
  /** `dev`: the dev server on SQLite; `cluster`: Temporal's server on PostgreSQL (VMPLANE_TEMPORAL). */
  temporalShape: 'dev' | 'cluster'
  temporalUiUrl: string
  namespace: string
  taskQueue: string
  databaseUrl: string
  /** The read-only token (`viewer` role). */
  viewerToken: string
  agentToken: string
  /** Each host, with the base images the stack gave it (a simulated host's stand-ins; none on a real one). */
  hosts: Array<{ id: string, url: string, stateDir: string, imageDir: string, storageDir: string, netns: string, images: string[] }>
  /** The LAN the hosts are on (stack-lan.ts). */
  lan: StackLan
  startedAt: string
}

/** `worker`, `worker-2`, …: the replicas of the worker or the API, as the stack's metrics name them. */
export function replicasOf (info: StackInfo, component: 'worker' | 'api'): string[] {
  const replica = new RegExp(`^${component}(-\\d+)?$`)
  return Object.keys(info.metricsUrls).filter((name) => replica.test(name))
}

/** Written whole or not at all (rename), readable by the owner only: it holds the tokens. */
export async function writeStackFile (path: string, info: StackInfo): Promise<void> {
  await writeFile(`${path}.partial`, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 })
  await rename(`${path}.partial`, path)
}

/** The whole of run/stack.json; null while the stack is not running or not ready. */
export async function readStackFile (path: string): Promise<StackInfo | null> {
  return await readPublishedStack<StackInfo>(path)
}

export async function removeStackFile (path: string): Promise<void> {
  await rm(path, { force: true })
}
