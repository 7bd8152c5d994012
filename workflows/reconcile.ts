/**
 * One pass of the reconciler (activities/reconciler.ts has the theory), run by the Temporal
 * Schedule `vmplane-reconciler` every VMPLANE_RECONCILE_SECONDS and on demand
 * (`POST /v1/admin/reconcile`, `temporal schedule trigger --schedule-id vmplane-reconciler`).
 * Its result, the counts by kind and what it did, shows in the Temporal UI and in
 * `GET /v1/admin/reconcile`.
 */
import { patched, uuid4 } from '@temporalio/workflow'
import type { HostReconciliation, ReconcileCounts } from '../contract/activities.js'
import { reconciler, records } from './activity-proxies.js'
import { HOST_LOSS_CATCH_UP_PATCH, INSTANCE_STORAGE_PATCH } from './patches.js'

export interface ReconcileSummary {
  passId: string
  counts: ReconcileCounts
  actions: string[]
}

export async function reconcile (): Promise<ReconcileSummary> {
  const passId = uuid4()
  const startedAt = new Date().toISOString()
  const counts: ReconcileCounts = {}
  const actions: string[] = []
  const add = (kind: string, n: number): void => { if (n > 0) counts[kind] = (counts[kind] ?? 0) + n }

  const hosts = await reconciler.reconcilableHosts()
  const tally = (host: HostReconciliation): void => {
    for (const [kind, n] of Object.entries(host.counts)) add(kind, n)
    actions.push(...host.actions)
  }
  for (const host of await Promise.all(hosts.map((hostId) => reconciler.reconcileHost(hostId)))) {
    add(host.reachable ? 'hostsChecked' : 'hostsUnreachable', 1)
    tally(host)
  }
  // The storage every host mounts is read once, through the first active host.
  const withStorage = patched(INSTANCE_STORAGE_PATCH)
  if (withStorage && hosts.length > 0) tally(await reconciler.reconcileStorage(hosts[0]!))
  for (const instance of await reconciler.driftedInstances()) {
    const action = await reconciler.redriveInstance(instance, uuid4())
    if (action !== null) {
      add('instancesRedriven', 1)
      actions.push(action)
    }
  }
  if (patched(HOST_LOSS_CATCH_UP_PATCH)) {
    const told = await reconciler.retellHostLosses()
    add('hostLossesRetold', told.length)
    actions.push(...told)
  }
  const closed = await reconciler.closeAbandonedOperations()
  add('operationsClosed', closed.length)
  actions.push(...closed)
  add('reservationsReleased', await reconciler.releaseLeakedReservations())
  if (withStorage) add('addressesAndDisksReleased', await reconciler.releaseLeakedAddresses())
  add('idempotencyKeysExpired', await reconciler.purgeIdempotencyKeys())
  await records.recordReconcilePass({ id: passId, startedAt, counts, actions })
  return { passId, counts, actions }
}
