/**
 * Bearer-token authentication with two roles. Registered inside the `/v1` scope, whose routes it
 * guards (fastify-plugin lifts the hook into that scope, and Fastify's encapsulation keeps it out
 * of the root): health checks, metrics and the API's own documentation stay public.
 *
 * - `operator` (VMPLANE_API_TOKEN) may do everything.
 * - `viewer` (VMPLANE_API_VIEWER_TOKEN, optional) may only read: GET and HEAD.
 *
 * A request without a valid token is 401 (who are you?); a viewer's request to change something
 * is 403 (we know who you are, and you may not), so a script can tell a typo from a missing role.
 */
import { timingSafeEqual } from 'node:crypto'
import fp from 'fastify-plugin'
import { bearerTokenOf } from '../../http/bearer-token.js'
import { ApiProblem } from './problem-details.js'

export type Role = 'operator' | 'viewer'

export interface ApiTokens {
  operator: string
  viewer: string | null
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The role of the request's bearer token; set before any `/v1` handler runs. */
    role: Role
  }
}

const READ_METHODS = new Set(['GET', 'HEAD'])

function sameToken (given: string, expected: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

function roleOf (token: string, tokens: ApiTokens): Role | null {
  if (sameToken(token, tokens.operator)) return 'operator'
  if (tokens.viewer !== null && sameToken(token, tokens.viewer)) return 'viewer'
  return null
}

export const requireToken = fp<{ tokens: ApiTokens }>(async (fastify, opts) => {
  fastify.decorateRequest('role', 'viewer')
  fastify.addHook('onRequest', async (request) => {
    const token = bearerTokenOf(request.headers.authorization)
    if (token === null) throw new ApiProblem(401, 'Unauthorized', 'this request needs an `Authorization: Bearer <token>` header')
    const role = roleOf(token, opts.tokens)
    if (role === null) throw new ApiProblem(401, 'Unauthorized', 'the bearer token is not valid')
    if (role === 'viewer' && !READ_METHODS.has(request.method)) {
      throw new ApiProblem(403, 'Forbidden', `a viewer token may only read; ${request.method} ${request.routeOptions.url ?? request.url} needs an operator token`)
    }
    request.role = role
  })
}, { name: 'require-token' })
