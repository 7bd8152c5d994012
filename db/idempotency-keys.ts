/**
 * The `idempotency_keys` table: the API's claims of `Idempotency-Key`s and the answers kept under
 * them (api/plugins/idempotency.ts has the theory; docs/design.md §9, §13). Written by the API,
 * but for the purge of keys a day old, which the reconciler does.
 *
 * A claim binds the key to its request's hash from the first one on; it is a lease its process
 * renews while the request runs. Only an unanswered key whose hash matches may be claimed again,
 * and only once its claim was given back, has lapsed, or was left by the process asking.
 */
import type { Queryable } from './pool.js'

export interface KeyClaim {
  principal: string
  key: string
  /** The process that claims, which alone renews or gives back its claims. */
  processId: string
}

/**
 * Claims the key for the request with this hash for `leaseSeconds`, or takes over a claim that
 * was given back, lapsed, or that this process left (`ownClaimInProgress` false: this process
 * has no request in progress under it). Whether the claim is this request's.
 */
export async function claimKey (
  db: Queryable,
  claim: KeyClaim & { requestHash: string, leaseSeconds: number, ownClaimInProgress: boolean }
): Promise<boolean> {
  const claimed = await db.query(
    `INSERT INTO idempotency_keys (principal, key, request_hash, claimed_until, claimed_by)
     VALUES ($1, $2, $3, now() + $4 * interval '1 second', $5)
     ON CONFLICT (principal, key) DO UPDATE
       SET claimed_until = EXCLUDED.claimed_until, claimed_by = EXCLUDED.claimed_by
       WHERE idempotency_keys.status IS NULL
         AND idempotency_keys.request_hash = EXCLUDED.request_hash
         AND (idempotency_keys.claimed_until IS NULL OR idempotency_keys.claimed_until < now()
           OR (idempotency_keys.claimed_by = $5 AND NOT $6))
     RETURNING 1`,
    [claim.principal, claim.key, claim.requestHash, claim.leaseSeconds, claim.processId, claim.ownClaimInProgress]
  )
  return claimed.rowCount === 1
}

export interface KeptKey {
  requestHash: string
  /** The answer kept, once the request was answered; null while it is not. */
  answer: { status: number, contentType: string, body: unknown } | null
}

export async function readKey (db: Queryable, principal: string, key: string): Promise<KeptKey | null> {
  const { rows } = await db.query(
    'SELECT request_hash, status, content_type, response FROM idempotency_keys WHERE principal = $1 AND key = $2',
    [principal, key]
  )
  if (rows.length === 0) return null
  const [row] = rows
  return { requestHash: row.request_hash, answer: row.status === null ? null : { status: row.status, contentType: row.content_type, body: row.response } }
}

/** Extends the lease of the process's claims of these keys, while their requests run. */
export async function renewClaims (db: Queryable, principal: string, keys: string[], processId: string, leaseSeconds: number): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET claimed_until = now() + $4 * interval '1 second'
      WHERE principal = $1 AND key = ANY($2) AND claimed_by = $3 AND status IS NULL`,
    [principal, keys, processId, leaseSeconds]
  )
}

/** Gives the claim back (the request failed on our side): the key stays bound to its request. */
export async function giveBackClaim (db: Queryable, claim: KeyClaim): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET claimed_until = NULL, claimed_by = NULL
      WHERE principal = $1 AND key = $2 AND claimed_by = $3 AND status IS NULL`,
    [claim.principal, claim.key, claim.processId]
  )
}

/** Keeps the request's answer under its key, the first one only. */
export async function keepAnswer (
  db: Queryable,
  kept: { principal: string, key: string, requestHash: string, status: number, contentType: string, body: string }
): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET status = $4, content_type = $5, response = $6
      WHERE principal = $1 AND key = $2 AND request_hash = $3 AND status IS NULL`,
    [kept.principal, kept.key, kept.requestHash, kept.status, kept.contentType, kept.body]
  )
}

/** Drops the keys a day old; how many. */
export async function purgeExpiredKeys (db: Queryable): Promise<number> {
  const { rowCount } = await db.query("DELETE FROM idempotency_keys WHERE created_at < now() - interval '1 day'")
  return rowCount ?? 0
}
