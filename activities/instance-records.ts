/**
 * Theory of operation: the write path, PostgreSQL's side (docs/design.md §8).
 *
 * An instance's execution is the only writer of its record (I4), and it writes only through
 * these activities, which it schedules as regular activities: a write happens only once the
 * workflow task that decided it has completed, so the decision is in the history before its
 * effect, and a workflow task that is retried (a worker killed or frozen, a task timeout) has
 * made no write that its retry could contradict.
 *
 * Every change is keyed by its decision (domain/decisions.ts): the key, hashed, is the ID of
 * the event the change appends. A change whose event exists was made before (an activity retried
 * after a crash, an execution replayed or reset) and is not made again; the activity answers
 * with the record as it is, and the execution takes that as the truth. A change never fails
 * because the record moved on since the execution last read it (only a reset's earlier run can
 * do that): it is applied to the record as it is, and the execution learns what that is from the
 * answer. A destroyed instance stays destroyed: a change records its event and operation, and
 * touches none of the instance's fields.
 *
 * A change also carries the VMM reports the execution received since its last write, applied
 * first in the same transaction, so an instance never shows a state its VMM's record does not
 * back.
 *
 * The statements are db/'s (one repository a table, docs/design.md §9); this module decides which
 * of them a change runs, all in one transaction.
 */
import { ApplicationFailure } from '@temporalio/activity'
import type { ChangeResult, InstanceChange, InstanceSnapshot, MigrationUpdate, RecordedMigration } from '../contract/records.js'
import { appendEvent, isEventRecorded } from '../db/instance-events.js'
import { insertInstance, lockInstance, readInstanceWithVmms, releaseDevicesOf, updateRuntimeFields } from '../db/instances.js'
import { advanceMigration, insertMigration, readMigrationRow } from '../db/live-migrations.js'
import { upsertOperation } from '../db/operations.js'
import { inTransaction, type Pool, type PoolClient, type Queryable } from '../db/pool.js'
import { readVmms, releaseReservationsOfInstance } from '../db/vmms.js'
import { crashPoint } from '../faults/crash-points.js'
import type { NewInstance } from '../domain/requests.js'
import type { VmmRecord } from '../domain/vmm.js'
import { eventIdOf } from './instance-events.js'
import { applyObservations } from './vmm-observations.js'

export async function readSnapshot (db: Queryable, instanceId: string): Promise<InstanceSnapshot | null> {
  const read = await readInstanceWithVmms(db, instanceId)
  if (read === null) return null
  const { instance, vmms: all } = read
  return {
    instance,
    liveVmms: all.filter((v) => v.state !== 'destroyed' && v.state !== 'failed' && v.state !== 'lost'),
    activeVmm: all.find((v) => v.id === instance.activeVmmId) ?? null
  }
}

/**
 * The instance as an execution begins with it. A create's execution inserts the rows if the API
 * did not (it died before its transaction committed); `null` if the instance does not exist (or,
 * for a create, its rows cannot be made now: its name or an address it asked for was taken
 * meanwhile, its network deleted, the storage filled. Nothing is made then, and nobody was told
 * the create was accepted).
 *
 * The rows are read first: the API has almost always committed them, and its one transaction
 * made all of them, so a row found needs no insert. One not found is inserted; should the API's
 * transaction be committing meanwhile, the insert waits for it on the instance's key and then
 * finds its rows (db/instances.ts `insertInstance`).
 */
export async function openInstance (pool: Pool, instanceId: string, create?: NewInstance): Promise<InstanceSnapshot | null> {
  const found = await readSnapshot(pool, instanceId)
  if (found !== null || create === undefined) return found
  const outcome = await inTransaction(pool, async (tx) => {
    const inserted = await insertInstance(tx, instanceId, create)
    // Nothing of a create that cannot be made stays: the transaction is rolled back.
    if (!inserted.inserted) throw new InsertRefused()
    return inserted
  }).catch((err: unknown) => { if (err instanceof InsertRefused) return null; throw err })
  return outcome === null ? null : await readSnapshot(pool, instanceId)
}

class InsertRefused extends Error {}

/** Records one change; see the module comment for why it is safe to retry. */
export async function recordInstanceChange (pool: Pool, change: InstanceChange): Promise<ChangeResult> {
  const result = await inTransaction(pool, async (tx) => await applyInstanceChange(tx, change))
  crashPoint('change.after-commit', change.kind)
  if (change.migration?.phase === 'committed') crashPoint('migrate.after-commit')
  return result
}

/** Applies a change inside a transaction of the caller's, and reads the record back. */
export async function applyInstanceChange (tx: PoolClient, change: InstanceChange): Promise<ChangeResult> {
  const { vmms, madeBefore } = await writeInstanceChange(tx, change)
  const snapshot = await readSnapshot(tx, change.instanceId)
  if (snapshot === null) throw new Error(`instance ${change.instanceId} vanished inside a transaction`)
  return { snapshot, vmms, madeBefore }
}

/**
 * Applies a change inside a transaction of the caller's, without reading the record back (a
 * placement reads it once, after the change it makes with the VMM's row); whether the instance
 * is destroyed once the change is made, its row locked until the transaction ends.
 */
export async function writeInstanceChange (tx: PoolClient, change: InstanceChange): Promise<Omit<ChangeResult, 'snapshot'> & { destroyed: boolean }> {
  const vmms = await applyObservations(tx, change.instanceId, change.observations ?? [])
  const locked = await lockInstance(tx, change.instanceId)
  if (locked === null) throw ApplicationFailure.nonRetryable(`instance ${change.instanceId} does not exist`, 'InstanceNotFound')
  const eventId = eventIdOf(change.decision)
  const madeBefore = await isEventRecorded(tx, eventId)
  if (!madeBefore) {
    if (!locked.destroyed) await updateInstance(tx, change)
    if (change.operation !== undefined) await upsertOperation(tx, change.instanceId, change.operation)
    if (change.migration !== undefined) await upsertMigration(tx, change.instanceId, change.migration)
    await appendEvent(tx, { ...change, eventId, operationId: change.operation?.id ?? null })
  }
  return { vmms, madeBefore, destroyed: locked.destroyed || (!madeBefore && change.set?.destroyed === true) }
}

async function updateInstance (tx: PoolClient, change: InstanceChange): Promise<void> {
  const set = change.set ?? {}
  await updateRuntimeFields(tx, change.instanceId, set)
  if (set.destroyed === true) {
    // The instance's VMMs are confirmed gone (the halt saw to it): what they held is free again,
    // its disks' space and its interfaces' addresses and MACs too.
    await releaseReservationsOfInstance(tx, change.instanceId)
    await releaseDevicesOf(tx, change.instanceId)
  }
}

export async function readMigration (db: Pool, migrationId: string): Promise<RecordedMigration | null> {
  const row = await readMigrationRow(db, migrationId)
  if (row === null) return null
  const vmms = await readVmms(db, [row.sourceVmmId, row.targetVmmId].filter((id) => id !== null))
  const vmm = (id: string | null): VmmRecord | null => vmms.find((v) => v.id === id) ?? null
  return { id: migrationId, phase: row.phase, reason: row.reason, cancelRequested: row.cancelRequested, source: vmm(row.sourceVmmId)!, target: vmm(row.targetVmmId) }
}

/**
 * Records a migration's step: inserted at its first (`reserving`, naming the source), then moved
 * forward only, and never once it is over, so a late or repeated step cannot undo a later one.
 */
async function upsertMigration (tx: PoolClient, instanceId: string, update: MigrationUpdate): Promise<void> {
  if (update.source !== undefined) await insertMigration(tx, { id: update.id, instanceId, source: update.source })
  await advanceMigration(tx, update)
}
