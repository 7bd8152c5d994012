/**
 * Theory of operation: draining a host (`drain-<hostId>`).
 *
 * The API cordons the host first (placement takes no host that is cordoned, so nothing new
 * lands there), then starts this workflow. It moves every instance whose active VMM lives on the
 * host to other hosts by live migration, a few at a time (`concurrency`), and ends `drained` only
 * once no VMM of any instance lives there:
 *
 * - Each round lists the instances with a live VMM on the host. A running one whose active VMM is
 *   there, with no migration of this drain in flight, is asked to migrate: a migrate operation of
 *   its own under `instance-<id>`, whose ID this workflow chooses (and so records) before the
 *   activity starts it, so a retry finds it. An instance busy with another operation, or not
 *   running yet, is tried again next round.
 * - An instance whose active VMM is elsewhere, with only a migration's other half on the host (a
 *   target placed before the cordon, a source not gone yet after its commit), is never asked to
 *   migrate (that would move its active VMM, not the one here): it is waited for. Its migration,
 *   or the kill of its source, ends that VMM; a target that commits makes it an instance to move.
 * - The outcomes of the operations in flight are read each round. A failed migration is tried
 *   again, up to `MAX_ATTEMPTS` per instance; after that the instance counts as failed.
 * - The drain ends `drained` once nothing lives on the host and every migration it asked for has
 *   its outcome (so `migrated` counts them all), `failed` when only instances whose migrations
 *   kept failing are left, or `stopped` when an operator uncordons the host (`uncordonHost`):
 *   migrations already asked for carry on as the operations they are.
 *
 * Stopped instances have no VMM and so no host: their disks are in the storage every host
 * mounts, and they start wherever placement puts them. There is nothing to move.
 *
 * Its progress (found: the instances whose active VMM it found on the host; migrated; failed) is
 * written for `GET /v1/hosts` after each round that changed it. The history is kept short by
 * continuing as new when Temporal suggests it, at the end of a round, and never once stopped: a
 * stop is a flag of the run that took it, which a next run would not have. (No stop can arrive
 * after that decision: Temporal refuses to close a run while a signal waits that its last task
 * did not see, and the task runs again with the signal.)
 */
import { condition, continueAsNew, patched, setHandler, uuid4, workflowInfo } from '@temporalio/workflow'
import type { DrainProgress } from '../contract/activities.js'
import { stopDrainSignal } from '../contract/messages.js'
import type { DrainHostInput, DrainState } from '../contract/workflows.js'
import type { MigrateRequest } from '../domain/requests.js'
import { records } from './activity-proxies.js'
import { DRAIN_AWAITS_OUTCOMES_PATCH, DRAIN_KEEPS_STOP_PATCH } from './patches.js'

/** How often the drain looks at the host and at its migrations. */
const ROUND_MS = 2000
/** Migrations of one instance tried before the drain gives up on it. */
const MAX_ATTEMPTS = 3

export async function drainHost (input: DrainHostInput): Promise<DrainProgress['status']> {
  const state: DrainState = input.state ?? { inFlight: {}, attempts: {}, found: [], migrated: 0, gaveUp: [], lastError: null }
  let stopped = false
  setHandler(stopDrainSignal, () => { stopped = true })
  let reported = ''
  const report = async (status: DrainProgress['status']): Promise<void> => {
    const progress: DrainProgress = { drainId: input.drainId, status, total: state.found.length, migrated: state.migrated, failed: state.gaveUp.length, lastError: state.lastError }
    const key = JSON.stringify(progress)
    if (key === reported) return
    reported = key
    await records.recordDrainProgress(input.hostId, progress)
  }

  while (!stopped) {
    await collectOutcomes(state)
    const onHost = await records.instancesOnHost(input.hostId)
    // Only an instance whose active VMM is here is moved, and counted found; one with only a
    // migration's other half here is waited for. (A result recorded before `activeElsewhere`
    // existed lacks it: it listed active VMMs only.)
    const toMove = onHost.filter((i) => !i.activeElsewhere)
    for (const instance of toMove) if (!state.found.includes(instance.id)) state.found.push(instance.id)
    const settled = Object.keys(state.inFlight).length === 0
    if (onHost.length === 0 && (settled || !patched(DRAIN_AWAITS_OUTCOMES_PATCH))) {
      await report('drained')
      return 'drained'
    }
    if (settled && onHost.every((i) => state.gaveUp.includes(i.id))) {
      await report('failed')
      return 'failed'
    }
    for (const instance of toMove) {
      if (Object.keys(state.inFlight).length >= input.concurrency) break
      if (state.inFlight[instance.id] !== undefined || state.gaveUp.includes(instance.id) || instance.state !== 'running') continue
      const request: MigrateRequest = { kind: 'migrate', operationId: uuid4(), instanceId: instance.id, requestedAt: new Date().toISOString() }
      if (await records.requestMigration(request, instance) === 'started') state.inFlight[instance.id] = request.operationId
    }
    await report('draining')
    // A stop taken this round ends the drain below; a next run would never hear of it.
    if (workflowInfo().continueAsNewSuggested && !(stopped && patched(DRAIN_KEEPS_STOP_PATCH))) await continueAsNew<typeof drainHost>({ ...input, state })
    await condition(() => stopped, ROUND_MS)
  }
  await report('stopped')
  return 'stopped'
}

/** Takes in the migrations that ended: moved, or one attempt more. */
async function collectOutcomes (state: DrainState): Promise<void> {
  const ids = Object.values(state.inFlight)
  if (ids.length === 0) return
  const outcomes = await records.operationOutcomes(ids)
  for (const [instanceId, operationId] of Object.entries(state.inFlight)) {
    const outcome = outcomes[operationId]
    if (outcome === undefined) continue
    delete state.inFlight[instanceId]
    if (outcome.status === 'succeeded') {
      state.migrated++
      continue
    }
    state.lastError = `instance ${instanceId}: ${outcome.error ?? outcome.status}`
    state.attempts[instanceId] = (state.attempts[instanceId] ?? 0) + 1
    if (state.attempts[instanceId] >= MAX_ATTEMPTS) state.gaveUp.push(instanceId)
  }
}
