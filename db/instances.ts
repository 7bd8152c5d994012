/**
 * The one statement that creates an instance's row, shared by the API (which inserts it when it
 * accepts a create) and the create workflow (which ensures it, should the API have died before
 * its transaction committed). Inserting twice is harmless: the second finds the first.
 */
import type { Pool, PoolClient } from './pool.js'
import type { NewInstance } from '../domain/requests.js'

/** Returns false when the name belongs to another live instance. */
export async function insertInstance (db: Pool | PoolClient, id: string, spec: NewInstance): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO instances (id, name, vcpus, memory_mib, boot, stop_grace_seconds, restart_policy, state, intended_state)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'creating', $8)
     ON CONFLICT DO NOTHING`,
    [id, spec.name, spec.vcpus, spec.memoryMiB, JSON.stringify(spec.boot), spec.stopGraceSeconds, spec.restartPolicy, spec.intendedState]
  )
  if (result.rowCount === 1) return true
  const existing = await db.query('SELECT 1 FROM instances WHERE id = $1', [id])
  return existing.rowCount === 1
}
