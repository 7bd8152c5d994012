/**
 * What every route of a server promises beyond what it declares, written into its schema as it
 * is added (the API's rules in api/plugins/route-contract.ts, the agent's in
 * host-agent/http/route-contract.ts):
 *
 * - A route that reads no query refuses one (`?bogus=1` is a 400, as on routes that read some),
 *   so that a misspelt parameter is never silently ignored.
 * - The errors a route may answer besides its own successes are listed in its schema, so the
 *   document has every status the server can give and every error body is written by its
 *   schema (http/json-serializer.ts). Routes declare only what is theirs: their successes. Any
 *   route of either server may answer 400 (a malformed request), 408 and 431 (Node's HTTP layer)
 *   and 500 (a bug); one with a path parameter 404 (no such thing) and 414 (a parameter over 100
 *   characters); a mutation 413 (a body over the limit) and 415 (not JSON). Each server adds its
 *   own (`errorStatuses`).
 * - The document says which routes need the bearer token.
 */
import type { RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { z, type ZodType } from 'zod'

type Route = Pick<RouteOptions, 'url' | 'method' | 'config'>

export interface RouteContract {
  /** The error statuses a route of this server may answer beyond those of any server's routes. */
  errorStatuses: (route: Route) => number[]
  /** How every error is sent: its content type and its body's schema. */
  error: { contentType: string, schema: ZodType }
  /** Whether a route needs the bearer token. */
  needsToken: (url: string) => boolean
}

/** Whether a route changes something: any method but GET and HEAD, each of which may carry a body. */
export function isMutation (route: Pick<RouteOptions, 'method'>): boolean {
  return [route.method].flat().some((method) => method !== 'GET' && method !== 'HEAD')
}

/** The error statuses of the module comment that any server's route may answer. */
function commonErrorStatuses (route: Route): number[] {
  return [
    400, 408, 431, 500,
    ...(route.url.includes(':') ? [404, 414] : []),
    ...(isMutation(route) ? [413, 415] : [])
  ]
}

/** The documented answer for an error: the server's error content type and schema. */
export function errorContent (contract: Pick<RouteContract, 'error'>) {
  return { content: { [contract.error.contentType]: { schema: contract.error.schema } } }
}

export const routeContract = fp<RouteContract>(async (fastify, contract) => {
  fastify.addHook('onRoute', (route) => {
    if (route.schema === undefined || route.schema.hide === true) return
    const statuses = [...commonErrorStatuses(route), ...contract.errorStatuses(route)]
    const errors = Object.fromEntries(statuses.map((status) => [status, errorContent(contract)]))
    route.schema.response = { ...errors, ...(route.schema.response as Record<string, unknown> | undefined) }
    route.schema.security = contract.needsToken(route.url) ? [{ bearer: [] }] : []
    route.schema.querystring ??= z.strictObject({})
  })
}, { name: 'route-contract' })
