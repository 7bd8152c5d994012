/**
 * Bearer-token authentication for every route but `/healthz`, `/metrics` and `/openapi.json`.
 * The comparison takes the same time whatever the token, so it leaks nothing about how much of
 * a guess was right.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { bearerTokenOf } from '../../http/bearer-token.js'

const PUBLIC_PATHS = new Set(['/healthz', '/metrics', '/openapi.json'])

function digest (value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

export function bearerAuth (token: string) {
  const expected = digest(token)
  return async function authenticate (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (PUBLIC_PATHS.has(request.url.split('?')[0]!)) return
    const presented = bearerTokenOf(request.headers.authorization)
    if (presented !== null && timingSafeEqual(digest(presented), expected)) return
    await reply
      .code(401)
      .header('www-authenticate', 'Bearer')
      .send({ error: 'Unauthorized', message: 'a valid bearer token is required' })
  }
}
