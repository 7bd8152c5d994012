/**
 * An instance's events (`instance_events`), the user-visible history: each records one decision
 * (docs/design.md §8). An event's ID is its decision's key hashed (`eventIdOf`), so a change whose
 * event exists was made before, and appending it again (db/instance-events.ts) does nothing.
 */
import { v5 as uuidv5 } from 'uuid'

/** The event ID that records a decision: the same key always gives the same ID. */
export function eventIdOf (decision: string): string {
  return uuidv5(decision, EVENT_NAMESPACE)
}
const EVENT_NAMESPACE = '5b0d6c4e-7a51-4f0e-9d4b-2f7f0c8c1e93'
