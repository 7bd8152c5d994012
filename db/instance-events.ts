/**
 * The `instance_events` table: an instance's history, as `GET /v1/instances/:id/events` pages it
 * (docs/design.md §9).
 *
 * An event is appended by the worker's activities only: with each change an instance's execution
 * records, keyed by its decision (the event's ID is the decision key hashed, so a change made
 * before is found, docs/design.md §8); when its active VMM stops or starts answering, once per
 * generation; and when its host becomes unreachable or answers again. Each event is stamped with
 * the instance's state as it is when the event is written.
 */
import type { EventKind, InstanceEvent } from '../domain/event.js'
import { EVENT_COLUMNS, toEvent } from './rows.js'
import type { PoolClient, Queryable } from './pool.js'

export interface NewEvent {
  /** The decision's key, hashed: an event with this ID records that the decision was made. */
  eventId: string
  instanceId: string
  kind: EventKind
  message: string
  details?: Record<string, unknown>
  vmmId?: string | null
  operationId?: string | null
}

/** Appends an event, stamped with the instance's state as it now is; once per event ID. */
export async function appendEvent (db: Queryable, event: NewEvent): Promise<void> {
  await db.query(
    `INSERT INTO instance_events (id, instance_id, kind, state, operation_id, vmm_id, message, details)
     SELECT $1, i.id, $3, i.state, $4, $5, $6, $7 FROM instances i WHERE i.id = $2
     ON CONFLICT (id) DO NOTHING`,
    [
      event.eventId,
      event.instanceId,
      event.kind,
      event.operationId ?? null,
      event.vmmId ?? null,
      event.message,
      event.details === undefined ? null : JSON.stringify(event.details)
    ]
  )
}

/** Whether the event is recorded: the decision it names was made. */
export async function isEventRecorded (tx: PoolClient, eventId: string): Promise<boolean> {
  const made = await tx.query('SELECT 1 FROM instance_events WHERE id = $1', [eventId])
  return made.rowCount !== 0
}

/** Appends an event to every instance whose active VMM lives on the host. */
export async function tellInstancesOnHost (db: Queryable, hostId: string, message: string): Promise<void> {
  await db.query(
    `INSERT INTO instance_events (id, instance_id, kind, state, vmm_id, message, details)
     SELECT gen_random_uuid(), i.id, 'condition-changed', i.state, v.id, $2, jsonb_build_object('hostId', $1::text)
       FROM instances i JOIN vmms v ON v.id = i.active_vmm_id
      WHERE v.host_id = $1 AND v.state NOT IN ('destroyed', 'failed', 'lost')`,
    [hostId, message]
  )
}

/** A page of an instance's events, newest first: those before `beforeSeq`, `limit` at most, each with its position. */
export async function eventPage (db: Queryable, instanceId: string, beforeSeq: number, limit: number): Promise<Array<{ event: InstanceEvent, seq: number }>> {
  const { rows } = await db.query(
    `SELECT ${EVENT_COLUMNS}, e.seq FROM instance_events e
      WHERE e.instance_id = $1 AND e.seq < $2
      ORDER BY e.seq DESC LIMIT $3`,
    [instanceId, beforeSeq, limit]
  )
  return rows.map((row) => ({ event: toEvent(row), seq: row.seq }))
}
