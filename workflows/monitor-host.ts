/**
 * One long-running workflow per host (`host-<id>`), fed by its agent's heartbeats.
 *
 * The first heartbeat registers the host; later ones keep its address and capacity current.
 * A host silent for longer than the unreachable threshold is marked `unreachable`, from the
 * moment it was last heard, and `active` again at its next heartbeat. That is all: losing contact
 * never touches its instances' state (I2). The history is kept short by continuing as new.
 */
import { condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow'
import type { HostAnnouncement } from '../domain/host.js'
import { records, settings } from './activities.js'
import { hostHeartbeatSignal, type MonitorHostInput } from './definitions.js'

/** Heartbeats are written through at most this often while nothing about the host changes. */
const REFRESH_EVERY_MS = 60_000

export async function monitorHost (input: MonitorHostInput): Promise<void> {
  const { hostUnreachableAfterMs } = await settings.operationSettings()
  let latest: HostAnnouncement | null = null
  let heardAt = 0
  setHandler(hostHeartbeatSignal, (announcement) => {
    latest = announcement
    heardAt = Date.now()
  })

  let recorded = input.lastAnnouncement
  let recordedAt = 0
  let reachable = true
  while (!workflowInfo().continueAsNewSuggested && workflowInfo().historyLength < 2000) {
    const heard = heardAt
    if (!reachable) {
      await condition(() => heardAt !== heard)
    } else if (!await condition(() => heardAt !== heard, hostUnreachableAfterMs)) {
      reachable = false
      await records.markHostUnreachable(input.hostId, heard === 0 ? null : new Date(heard).toISOString())
      continue
    }
    const announcement = latest as HostAnnouncement | null
    if (announcement === null) continue
    if (!reachable || changed(recorded, announcement) || Date.now() - recordedAt >= REFRESH_EVERY_MS) {
      await records.recordHostHeartbeat(announcement)
      recorded = announcement
      recordedAt = Date.now()
      reachable = true
    }
  }
  await continueAsNew<typeof monitorHost>({ hostId: input.hostId, lastAnnouncement: recorded })
}

function changed (before: HostAnnouncement | null, after: HostAnnouncement): boolean {
  return before === null ||
    before.agentUrl !== after.agentUrl ||
    before.agentStartedAt !== after.agentStartedAt ||
    before.capacity.vcpus !== after.capacity.vcpus ||
    before.capacity.memoryMiB !== after.capacity.memoryMiB
}
