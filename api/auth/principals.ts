/**
 * Who a bearer token is (docs/design.md §18). Three tokens come from the environment, compared in
 * constant time: the bootstrap fleet operator (`VMPLANE_API_TOKEN`), the fleet viewer
 * (`VMPLANE_API_VIEWER_TOKEN`) and the host agents' (`VMPLANE_AGENT_TOKEN`). Every other token is
 * a person's (api/auth/token-secrets.ts): its row is read by the ID it carries, its secret checked
 * against the stored hash, then its expiry and revocation, so a guessed ID learns nothing.
 */
import { timingSafeEqual } from 'node:crypto'
import { findTokenForAuth } from '../../db/api-tokens.js'
import type { Queryable } from '../../db/pool.js'
import type { Principal } from '../../domain/access-policy.js'
import { parseToken, SecretVerifier } from './token-secrets.js'

export interface EnvironmentTokens {
  operator: string
  viewer: string | null
  host: string | null
}

/** The environment's tokens, as principals: their IDs and names are fixed, and say where they come from. */
const BOOTSTRAP: Record<keyof EnvironmentTokens, Principal> = {
  operator: { tokenId: 'operator', tokenName: 'VMPLANE_API_TOKEN', role: 'fleet-operator', projectId: null },
  viewer: { tokenId: 'viewer', tokenName: 'VMPLANE_API_VIEWER_TOKEN', role: 'fleet-viewer', projectId: null },
  host: { tokenId: 'host-agents', tokenName: 'VMPLANE_AGENT_TOKEN', role: 'host', projectId: null }
}

export type Authentication = { principal: Principal } | { refused: string }

function sameToken (given: string, expected: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

export class Authenticator {
  readonly #verifier = new SecretVerifier()

  constructor (private readonly db: Queryable, private readonly environment: EnvironmentTokens) {}

  async authenticate (token: string): Promise<Authentication> {
    for (const kind of ['operator', 'viewer', 'host'] as const) {
      const expected = this.environment[kind]
      if (expected !== null && sameToken(token, expected)) return { principal: BOOTSTRAP[kind] }
    }
    const parsed = parseToken(token)
    if (parsed === null) return { refused: 'the bearer token is not valid' }
    const row = await findTokenForAuth(this.db, parsed.id)
    if (row === null || !await this.#verifier.matches(parsed, row)) return { refused: 'the bearer token is not valid' }
    if (row.revokedAt !== null) return { refused: `token ${row.id} (${row.name}) was revoked at ${row.revokedAt}` }
    if (row.expired) return { refused: `token ${row.id} (${row.name}) expired at ${row.expiresAt}` }
    return { principal: { tokenId: row.id, tokenName: row.name, role: row.role, projectId: row.projectId } }
  }
}
