/**
 * When the stack is ready: every host agent answers /healthz, every API replica and the one
 * address in front of them answer /readyz (200 only once Temporal, PostgreSQL and a worker are
 * reachable), and the control plane lists every host as active, so a VM can be placed the moment
 * the stack says it is ready. The dev stack waits for this before it writes run/stack.json; tests
 * wait for it again after killing a component.
 */
import { hostListSchema } from '../api/schemas/hosts.js'
import { answersOk, waitFor, type WaitOptions } from './wait.js'

export interface ReadinessTargets {
  /** The one address clients use. */
  apiUrl: string
  /** Each API replica's own address. */
  apiUrls: readonly string[]
  apiToken: string
  hosts: ReadonlyArray<{ id: string, url: string }>
}

/** What is not ready yet, one phrase each; empty when the stack is ready. */
export async function unreadyParts (targets: ReadinessTargets): Promise<string[]> {
  const checks: Array<[string, () => Promise<boolean>]> = [
    ...targets.hosts.map((host): [string, () => Promise<boolean>] =>
      [`the host agent of ${host.id} (${host.url}/healthz)`, () => answersOk(`${host.url}/healthz`)]),
    ...[...new Set([targets.apiUrl, ...targets.apiUrls])].map((url): [string, () => Promise<boolean>] =>
      [`the API (${url}/readyz)`, () => answersOk(`${url}/readyz`)]),
    [`every host active in ${targets.apiUrl}/v1/hosts`, () => hostsActive(targets)]
  ]
  const ready = await Promise.all(checks.map(([, check]) => check().catch(() => false)))
  return checks.filter((_, i) => !ready[i]).map(([what]) => what)
}

async function hostsActive (targets: ReadinessTargets): Promise<boolean> {
  const response = await fetch(`${targets.apiUrl}/v1/hosts`, {
    headers: { authorization: `Bearer ${targets.apiToken}` },
    signal: AbortSignal.timeout(3000)
  })
  if (response.status !== 200) return false
  const { items } = hostListSchema.parse(await response.json())
  return targets.hosts.every((host) => items.some((item) => item.id === host.id && item.status === 'active'))
}

export async function waitForStackReady (targets: ReadinessTargets, options: WaitOptions): Promise<void> {
  let unready: string[] = []
  await waitFor('the stack becoming ready', async () => {
    unready = await unreadyParts(targets)
    return unready.length === 0 ? true : null
  }, {
    ...options,
    intervalMs: options.intervalMs ?? 500,
    detail: async () => [`not ready: ${unready.join('; ')}`, await options.detail?.()].filter(Boolean).join('\n')
  })
}
