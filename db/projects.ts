/**
 * Projects (docs/design.md §18): a name unique among live projects, and the quotas row each one
 * is made with (db/quotas.ts). A project is deleted only once it owns nothing live: no instance,
 * no network; its tokens are revoked with it.
 */
import { UUID_PATTERN } from '../domain/ids.js'
import type { Project } from '../domain/projects.js'
import { revokeTokensOfProject } from './api-tokens.js'
import { inTransaction, type Pool, type Queryable } from './pool.js'
import { deleteQuotasRow, insertQuotasRow, lockQuotasRow } from './quotas.js'

export interface ProjectRow extends Project {
  createdAt: string
}

const COLUMNS = 'id, name, created_at'

function toProject (row: Record<string, any>): ProjectRow {
  return { id: row.id, name: row.name, createdAt: row.created_at }
}

/** The new project, or `name-taken`; inserting one ID twice finds the first. */
export async function insertProject (db: Pool, project: Project): Promise<ProjectRow | 'name-taken'> {
  try {
    await inTransaction(db, async (tx) => {
      const inserted = await tx.query('INSERT INTO projects (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [project.id, project.name])
      if (inserted.rowCount === 1) await insertQuotasRow(tx, project.id)
    })
  } catch (err) {
    const { code, constraint } = err as { code?: string, constraint?: string }
    if (code === '23505' && constraint === 'projects_live_name') return 'name-taken'
    throw err
  }
  return (await findProject(db, project.id))!
}

/** The live projects, by name: all of them, or the one a project's token is bound to. */
export async function listProjects (db: Queryable, only: string | null): Promise<ProjectRow[]> {
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM projects WHERE deleted_at IS NULL AND ($1::uuid IS NULL OR id = $1::uuid) ORDER BY name`,
    [only]
  )
  return rows.map(toProject)
}

/** A live project by ID or by name. */
export async function findProject (db: Queryable, idOrName: string): Promise<ProjectRow | null> {
  const byId = UUID_PATTERN.test(idOrName)
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM projects WHERE deleted_at IS NULL AND ${byId ? 'id = $1::uuid' : 'name = $1'}`,
    [idOrName]
  )
  return rows.length === 0 ? null : toProject(rows[0])
}

/**
 * Deletes a project that owns nothing live, revoking its tokens: `deleted`, `missing`, or what it
 * still owns. Its quotas row is locked first, as every charge of a create in it locks it, and
 * deleted with it: a create that waited on the lock then finds no row to charge, and is refused
 * (db/quotas.ts), so no instance is ever made in a deleted project.
 */
export async function deleteProject (db: Pool, id: string): Promise<'deleted' | 'missing' | { instances: number, networks: number }> {
  return await inTransaction(db, async (tx) => {
    if (!await lockQuotasRow(tx, id)) return 'missing'
    const { rows } = await tx.query(
      `SELECT (SELECT count(*) FROM instances WHERE project_id = $1 AND destroyed_at IS NULL)::int AS instances,
              (SELECT count(*) FROM networks WHERE project_id = $1 AND deleted_at IS NULL)::int AS networks`,
      [id]
    )
    const owned = { instances: rows[0].instances as number, networks: rows[0].networks as number }
    if (owned.instances > 0 || owned.networks > 0) return owned
    await revokeTokensOfProject(tx, id)
    await deleteQuotasRow(tx, id)
    await tx.query('UPDATE projects SET deleted_at = now() WHERE id = $1', [id])
    return 'deleted'
  })
}
