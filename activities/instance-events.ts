/**
 * An instance's events (`instance_events`), the user-visible history: each records one decision
 * (docs/design.md §8). An event's ID is its decision's key hashed (`eventIdOf`), so a change whose
 * event exists was made before, and appending it again does nothing.
 */
import { v5 as uuidv5 } from 'uuid'
import type { ChangeEvent } from '../contract/records.js'
import type { Pool, PoolClient } from '../db/pool.js'

/** The event ID that records a decision: the same key always gives the same ID. */
export function eventIdOf (decision: string): string {
  return uuidv5(decision, EVENT_NAMESPACE)
}
const EVENT_NAMESPACE = '5b0d6c4e-7a51-4f0e-9d4b-2f7f0c8c1e93'

/** Appends an event, stamped with the instance's state as it now is; once per event ID. */
export async function appendEvent (
  tx: Pool | PoolClient,
  event: ChangeEvent & { instanceId: string, eventId: string, operationId?: string | null }
): Promise<void> {
  await tx.query(
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
