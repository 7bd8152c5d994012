/**
 * `run/stack.json`: written once the whole stack is ready, removed when it stops. It says where
 * everything is; the test harness waits for it and reads its URLs and tokens from it.
 */
import { readFile, rename, rm, writeFile } from 'node:fs/promises'
import type { StackLan } from './stack-lan.js'

export interface StackInfo {
  /** The one address clients use: the API, or HAProxy in front of its replicas. */
  apiUrl: string
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
  apiToken: string
  /** The read-only token (`viewer` role). */
  viewerToken: string
  agentToken: string
  hosts: Array<{ id: string, url: string, stateDir: string, imageDir: string, storageDir: string, netns: string }>
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

export async function readStackFile (path: string): Promise<StackInfo | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as StackInfo
  } catch {
    return null
  }
}

export async function removeStackFile (path: string): Promise<void> {
  await rm(path, { force: true })
}
