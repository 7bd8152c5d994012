/**
 * People's API tokens (docs/design.md §18): each row holds a token's scrypt hash and salt, never
 * the token (api/auth/token-secrets.ts), its project (null: the fleet's), its role, and when it
 * expires or was revoked.
 */
import type { Role } from '../domain/access-policy.js'
import type { Queryable } from './pool.js'

export interface TokenRow {
  id: string
  name: string
  projectId: string | null
  role: Role
  createdBy: string
  createdAt: string
  expiresAt: string
  revokedAt: string | null
}

export interface StoredSecret {
  salt: Buffer
  hash: Buffer
}

const COLUMNS = 'id, name, project_id, role, created_by, created_at, expires_at, revoked_at'

function toToken (row: Record<string, any>): TokenRow {
  return {
    id: row.id,
    name: row.name,
    projectId: row.project_id,
    role: row.role,
    createdBy: row.created_by,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at
  }
}

export async function insertToken (db: Queryable, token: Omit<TokenRow, 'createdAt' | 'revokedAt'> & StoredSecret): Promise<TokenRow> {
  const { rows } = await db.query(
    `INSERT INTO api_tokens (id, name, secret_salt, secret_hash, project_id, role, created_by, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${COLUMNS}`,
    [token.id, token.name, token.salt, token.hash, token.projectId, token.role, token.createdBy, token.expiresAt]
  )
  return toToken(rows[0])
}

/** A token with its stored secret, for authentication; whether it has expired, on PostgreSQL's clock. */
export async function findTokenForAuth (db: Queryable, id: string): Promise<(TokenRow & StoredSecret & { expired: boolean }) | null> {
  const { rows } = await db.query(`SELECT ${COLUMNS}, secret_salt, secret_hash, expires_at <= now() AS expired FROM api_tokens WHERE id = $1`, [id])
  if (rows.length === 0) return null
  return { ...toToken(rows[0]), salt: rows[0].secret_salt, hash: rows[0].secret_hash, expired: rows[0].expired }
}

/** A project's tokens (or, with null, the fleet's), newest first, revoked and expired ones included. */
export async function listTokens (db: Queryable, projectId: string | null): Promise<TokenRow[]> {
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM api_tokens WHERE project_id IS NOT DISTINCT FROM $1::uuid ORDER BY created_at DESC, id`,
    [projectId]
  )
  return rows.map(toToken)
}

/** Revokes every token of the project, as it is deleted. */
export async function revokeTokensOfProject (db: Queryable, projectId: string): Promise<void> {
  await db.query('UPDATE api_tokens SET revoked_at = now() WHERE project_id = $1 AND revoked_at IS NULL', [projectId])
}

/** Revokes the token of that project (or of the fleet, with null); null when there is none. Revoking twice keeps the first time. */
export async function revokeToken (db: Queryable, id: string, projectId: string | null): Promise<TokenRow | null> {
  const { rows } = await db.query(
    `UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now())
      WHERE id = $1 AND project_id IS NOT DISTINCT FROM $2::uuid RETURNING ${COLUMNS}`,
    [id, projectId]
  )
  return rows.length === 0 ? null : toToken(rows[0])
}
