/**
 * Bearer-token authentication with three roles. Registered inside the `/v1` scope, whose routes it
 * guards (fastify-plugin lifts the hook into that scope, and Fastify's encapsulation keeps it out
 * of the root): health checks, metrics and the API's own documentation stay public.
 *
 * - `operator` (VMPLANE_API_TOKEN) may do everything people do.
 * - `viewer` (VMPLANE_API_VIEWER_TOKEN, optional) may only read: GET and HEAD.
 * - `host` (VMPLANE_AGENT_TOKEN, the host agents' token) may only call the routes marked
 *   `config: { hostsOnly: true }` (a host renewing its lease), which nobody else may call.
 *
 * A request without a valid token is 401 (who are you?); a viewer's request to change something
 * is 403 (we know who you are, and you may not), so a script can tell a typo from a missing role.
 */
import { timingSafeEqual } from 'node:crypto'
import fp from 'fastify-plugin'
import { bearerTokenOf } from '../../http/bearer-token.js'
import { ApiProblem } from './problem-details.js'

export type Role = 'operator' | 'viewer' | 'host'

export interface ApiTokens {
  operator: string
  viewer: string | null
  host: string | null
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The role of the request's bearer token; set before any `/v1` handler runs. */
    role: Role
  }
  interface FastifyContextConfig {
    /** Only the host agents' token may call the route, and it may call no other. */
    hostsOnly?: boolean
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
  if (tokens.host !== null && sameToken(token, tokens.host)) return 'host'
  return null
}

export const requireToken = fp<{ tokens: ApiTokens }>(async (fastify, opts) => {
  fastify.decorateRequest('role', 'viewer')
  fastify.addHook('onRequest', async (request) => {
    const token = bearerTokenOf(request.headers.authorization)
    if (token === null) throw new ApiProblem(401, 'Unauthorized', 'this request needs an `Authorization: Bearer <token>` header')
    const role = roleOf(token, opts.tokens)
    if (role === null) throw new ApiProblem(401, 'Unauthorized', 'the bearer token is not valid')
    const route = `${request.method} ${request.routeOptions.url ?? request.url}`
    const hostsOnly = request.routeOptions.config?.hostsOnly === true
    if (hostsOnly !== (role === 'host')) {
      throw new ApiProblem(403, 'Forbidden', hostsOnly ? `${route} is the host agents' own: it needs their token` : `the host agents' token may only renew a host's lease; ${route} needs an operator token`)
    }
    if (role === 'viewer' && !READ_METHODS.has(request.method)) {
      throw new ApiProblem(403, 'Forbidden', `a viewer token may only read; ${route} needs an operator token`)
    }
    request.role = role
  })
}, { name: 'require-token' })
