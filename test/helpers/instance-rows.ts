/**
 * Instances written straight into PostgreSQL, for what reads them and does not care how a row got
 * there (the list's pages, the benchmark's reads): making them through workflows would time the
 * writes, not the reads. Named `<prefix>1` to `<prefix><count>`, in that insertion order.
 */
import type { Queryable } from '../../db/pool.js'

export async function insertBareInstances (db: Queryable, rows: { prefix: string, count: number, destroyed?: boolean }): Promise<string[]> {
  const state = rows.destroyed === true ? 'destroyed' : 'stopped'
  const { rows: inserted } = await db.query<{ id: string }>(
    `INSERT INTO instances (id, project_id, name, vcpus, memory_mib, boot, stop_grace_seconds, state, intended_state, destroyed_at)
     SELECT gen_random_uuid(), (SELECT id FROM projects WHERE name = 'default'), $1 || n, 1, 64, '{"kernel": "vmlinux"}', 30, $3, $3,
            CASE WHEN $3 = 'destroyed' THEN now() END
       FROM generate_series(1, $2::int) AS n
      ORDER BY n
     RETURNING id`,
    [rows.prefix, rows.count, state]
  )
  return inserted.map((row) => row.id)
}
