/**
 * The token of an `Authorization: Bearer <token>` header, or null. The scheme's name is
 * case-insensitive (RFC 9110 §11.1), so `bearer <token>` is the same header.
 */
const BEARER = /^bearer +(\S+)$/i

export function bearerTokenOf (header: string | undefined): string | null {
  return BEARER.exec(header ?? '')?.[1] ?? null
}
