/**
 * When the stack is ready: every host agent answers /healthz, every API replica and the one
 * address in front of them answer /readyz (200 only once Temporal, PostgreSQL and a worker are
 * reachable), and the control plane lists every host as active, with the images the stack gave it
 * (the stand-in images of a simulated host) among what it announced, so a VM can be placed, and
 * created from those images, the moment the stack says it is ready. An API's /readyz alone does
 * not say that: it means the API can serve, hosts or not (docs/operations.md, Readiness). The dev
 * stack waits for this before it writes run/stack.json; tests wait for it again after killing a
 * component.
 */
import { hostListSchema } from '../api/schemas/hosts.js'
import { imageListSchema } from '../api/schemas/images.js'
import { answersOk, waitFor, type WaitOptions } from './wait.js'

export interface ReadinessTargets {
  /** The one address clients use. */
  apiUrl: string
  /** Each API replica's own address. */
  apiUrls: readonly string[]
  apiToken: string
  /** Each host, with the base images the stack gave it, which it must have announced. */
  hosts: ReadonlyArray<{ id: string, url: string, images: readonly string[] }>
}

/** What is not ready yet, one phrase each; empty when the stack is ready. */
export async function unreadyParts (targets: ReadinessTargets): Promise<string[]> {
  const checks: Array<[string, () => Promise<boolean>]> = [
    ...targets.hosts.map((host): [string, () => Promise<boolean>] =>
      [`the host agent of ${host.id} (${host.url}/healthz)`, () => answersOk(`${host.url}/healthz`)]),
    ...[...new Set([targets.apiUrl, ...targets.apiUrls])].map((url): [string, () => Promise<boolean>] =>
      [`the API (${url}/readyz)`, () => answersOk(`${url}/readyz`)]),
    [`every host active, holding its lease, in ${targets.apiUrl}/v1/hosts`, () => hostsActive(targets)],
    ...targets.hosts.filter((host) => host.images.length > 0).map((host): [string, () => Promise<boolean>] =>
      [`${host.id} announcing ${host.images.join(', ')} (${targets.apiUrl}/v1/images)`, () => imagesAnnounced(targets, host)])
  ]
  const ready = await Promise.all(checks.map(([, check]) => check().catch(() => false)))
  return checks.filter((_, i) => !ready[i]).map(([what]) => what)
}

/** Every host active, and holding its lease if it keeps one: placement takes no other (docs/design.md §17). */
async function hostsActive (targets: ReadinessTargets): Promise<boolean> {
  const listed = await getJson(targets, '/v1/hosts')
  if (listed === null) return false
  const { items } = hostListSchema.parse(listed)
  return targets.hosts.every((host) => items.some((item) => item.id === host.id && item.status === 'active' && ['none', 'held'].includes(item.lease.state)))
}

/** Whether the control plane lists the host among those that have each of its images. */
async function imagesAnnounced (targets: ReadinessTargets, host: ReadinessTargets['hosts'][number]): Promise<boolean> {
  const listed = await getJson(targets, '/v1/images')
  if (listed === null) return false
  const { items } = imageListSchema.parse(listed)
  return host.images.every((name) => items.some((image) => image.name === name && image.hosts.includes(host.id)))
}

/** A GET of the API's answered with 200, or null. */
async function getJson (targets: ReadinessTargets, path: string): Promise<unknown> {
  const response = await fetch(`${targets.apiUrl}${path}`, {
    headers: { authorization: `Bearer ${targets.apiToken}` },
    signal: AbortSignal.timeout(3000)
  })
  if (response.status !== 200) {
    await response.body?.cancel()
    return null
  }
  return await response.json()
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
