/**
 * The `reconcile_passes` table: what each reconciler pass found and did (docs/design.md §9),
 * recorded by the reconciler's activity and listed by `GET /v1/admin/reconcile`.
 */
import type { Queryable } from './pool.js'

export interface RecordedPass {
  id: string
  startedAt: string
  counts: Record<string, number>
  actions: string[]
}

/** Records a pass once (a retried activity finds it recorded); its end is when it is recorded. */
export async function insertReconcilePass (db: Queryable, pass: RecordedPass): Promise<void> {
  await db.query(
    'INSERT INTO reconcile_passes (id, started_at, counts, actions) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
    [pass.id, pass.startedAt, JSON.stringify(pass.counts), JSON.stringify(pass.actions)]
  )
}

/** The last passes, newest first. */
export async function lastReconcilePasses (db: Queryable, limit: number): Promise<Array<RecordedPass & { finishedAt: string }>> {
  const { rows } = await db.query(
    'SELECT id, started_at, finished_at, counts, actions FROM reconcile_passes ORDER BY started_at DESC LIMIT $1',
    [limit]
  )
  return rows.map((r) => ({ id: r.id, startedAt: r.started_at, finishedAt: r.finished_at, counts: r.counts, actions: r.actions }))
}
