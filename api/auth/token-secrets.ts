/**
 * People's API tokens as strings: `vmp_<ID, 32 hex digits>_<secret, 43 base64url characters>`.
 * The ID says which row to read; the secret (256 random bits) is kept only as its scrypt hash, with
 * a salt of its own (node:crypto's scrypt: a memory-hard KDF), so a copy of the database gives no
 * usable token. It is shown once, when the token is made.
 *
 * scrypt costs tens of milliseconds on purpose; a process remembers the tokens it has verified
 * (a digest of each, never the token) so only a token's first request in each API process pays.
 */
import { createHash, randomBytes, randomUUID, scrypt, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'
import { LRUCache } from 'lru-cache'

const TOKEN_PATTERN = /^vmp_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/
const SALT_BYTES = 16
const HASH_BYTES = 32
/** scrypt's cost: 2^14 iterations of 8 blocks, 16 MiB, as OWASP's cheat sheet's minimum. */
const SCRYPT_OPTIONS = { N: 2 ** 14, r: 8, p: 1 }
/** How many verified tokens each API process remembers. */
const VERIFIED_TOKENS = 10_000

const scryptAsync = promisify(scrypt) as (secret: string, salt: Buffer, length: number, options: typeof SCRYPT_OPTIONS) => Promise<Buffer>

export interface NewToken {
  id: string
  /** The whole token, for the person who asked for it; never stored. */
  token: string
  salt: Buffer
  hash: Buffer
}

export async function makeToken (): Promise<NewToken> {
  const id = randomUUID()
  const secret = randomBytes(32).toString('base64url')
  const salt = randomBytes(SALT_BYTES)
  return { id, token: `vmp_${id.replaceAll('-', '')}_${secret}`, salt, hash: await hashSecret(secret, salt) }
}

/** The token's ID and secret, or null when it is not shaped as vmplane's tokens are. */
export function parseToken (token: string): { id: string, secret: string } | null {
  const match = TOKEN_PATTERN.exec(token)
  if (match === null) return null
  const hex = match[1]
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  return { id, secret: match[2] }
}

async function hashSecret (secret: string, salt: Buffer): Promise<Buffer> {
  return await scryptAsync(secret, salt, HASH_BYTES, SCRYPT_OPTIONS)
}

/** Checks secrets against their stored hashes, remembering the tokens that passed. */
export class SecretVerifier {
  readonly #verified = new LRUCache<string, true>({ max: VERIFIED_TOKENS })

  async matches (token: { id: string, secret: string }, stored: { salt: Buffer, hash: Buffer }): Promise<boolean> {
    const digest = createHash('sha256').update(`${token.id}\n${token.secret}\n`).update(stored.hash).digest('base64')
    if (this.#verified.has(digest)) return true
    const hash = await hashSecret(token.secret, stored.salt)
    const matches = hash.length === stored.hash.length && timingSafeEqual(hash, stored.hash)
    if (matches) this.#verified.set(digest, true)
    return matches
  }
}
