/**
 * What every route of a server promises beyond what it declares, written into its schema as it
 * is added (the API's rules in api/plugins/route-contract.ts, the agent's in
 * host-agent/http/route-contract.ts):
 *
 * - A route that reads no query refuses one (`?bogus=1` is a 400, as on routes that read some),
 *   so that a misspelt parameter is never silently ignored.
 * - The errors a route may answer besides its own successes are listed in its schema, so the
 *   document has every status the server can give and the serializer checks every error body.
 *   Routes declare only what is theirs: their successes.
 * - The document says which routes need the bearer token.
 */
import type { RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { z, type ZodType } from 'zod'

export interface RouteContract {
  /** The error statuses a route may answer beyond its own. */
  errorStatuses: (route: Pick<RouteOptions, 'url' | 'method'>) => number[]
  /** How every error is sent: its content type and its body's schema. */
  error: { contentType: string, schema: ZodType }
  /** Whether a route needs the bearer token. */
  needsToken: (url: string) => boolean
}

/** The error statuses any route may answer: a malformed request (400), Node's HTTP layer (408, 431), a bug (500). */
export const ANY_ROUTE_ERRORS = [400, 408, 431, 500]

/** Whether a route's methods may carry a body, and so be answered 413 or 415. */
export function takesBody (route: Pick<RouteOptions, 'method'>): boolean {
  return [route.method].flat().some((method) => method !== 'GET' && method !== 'HEAD')
}

/** The documented answer for an error: the server's error content type and schema. */
export function errorContent (contract: Pick<RouteContract, 'error'>) {
  return { content: { [contract.error.contentType]: { schema: contract.error.schema } } }
}

export const routeContract = fp<RouteContract>(async (fastify, contract) => {
  fastify.addHook('onRoute', (route) => {
    if (route.schema === undefined || route.schema.hide === true) return
    const errors = Object.fromEntries(contract.errorStatuses(route).map((status) => [status, errorContent(contract)]))
    route.schema.response = { ...errors, ...(route.schema.response as Record<string, unknown> | undefined) }
    route.schema.security = contract.needsToken(route.url) ? [{ bearer: [] }] : []
    route.schema.querystring ??= z.strictObject({})
  })
}, { name: 'route-contract' })
