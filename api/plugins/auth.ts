/**
 * Authentication and authorization for every `/v1` route, decided in one place from the policy
 * table (domain/access-policy.ts; docs/design.md §18). Registered inside the `/v1` scope, whose
 * routes it guards (fastify-plugin lifts its hooks into that scope, and Fastify's encapsulation
 * keeps them out of the root): health checks, metrics and the API's own documentation stay public.
 *
 * Each `/v1` route names its action (`config: { action }`); a route that names none is refused
 * when it is registered, so none is left open by mistake. A request then goes through, in order:
 *
 * 1. its bearer token: none, an unknown one, an expired or a revoked one is 401 (who are you?);
 * 2. its project, for a project's action: the one its path names (`/v1/projects/{project}/…`), or
 *    `default` on the deprecated unscoped paths, which say so in `Deprecation`, `Sunset` and
 *    `Link` headers (RFC 9745, RFC 8594); a project that does not exist is 404;
 * 3. the policy's decision: a token of another project gets the 404 a missing project gets, so no
 *    token learns what another project holds; a role without the action is 403 (we know who you
 *    are, and you may not), naming the roles that may.
 */
import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { findProject, type ProjectRow } from '../../db/projects.js'
import { ACTIONS, decide, isProjectAction, rolesWith, type Action, type Principal } from '../../domain/access-policy.js'
import { DEFAULT_PROJECT, DEFAULT_PROJECT_NAME } from '../../domain/projects.js'
import { bearerTokenOf } from '../../http/bearer-token.js'
import { Authenticator, type EnvironmentTokens } from '../auth/principals.js'
import { projectRefSchema } from '../schemas/projects.js'
import { ApiProblem } from './problem-details.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Who sent the request; set before any `/v1` handler runs. */
    principal: Principal
    /** The project the request acts in: the one its path names, `default` on an unscoped path; null for the fleet's routes. */
    project: Pick<ProjectRow, 'id' | 'name'> | null
  }
  interface FastifyContextConfig {
    /** What the route does, as the policy table knows it. Every `/v1` route names one. */
    action?: Action
  }
}

/** When the unscoped paths (the `default` project's) were deprecated, as RFC 9745 writes it: the day projects came. */
const UNSCOPED_PATHS_DEPRECATED = '@1795910400'
/** When they end: a year later. */
const UNSCOPED_PATHS_SUNSET = 'Mon, 29 Nov 2027 00:00:00 GMT'

/** What each action lets a token do, for refusals. */
const ACTION_PHRASES: Record<Action, string> = {
  'project.read': "read a project's resources",
  'project.write': "change a project's resources",
  'project.tokens': "manage a project's tokens",
  'project.audit': "read a project's audit trail",
  'projects.list': 'list projects',
  'images.read': 'read images',
  'fleet.read': 'read the fleet',
  'fleet.write': 'run the fleet',
  'lease.renew': "renew a host's lease"
}

function describe (principal: Principal): string {
  return `the ${principal.role} token ${principal.tokenName}`
}

export const authorize = fp<{ tokens: EnvironmentTokens }>(async (fastify, opts) => {
  const authenticator = new Authenticator(fastify.db, opts.tokens)
  fastify.decorateRequest('principal', null as unknown as Principal)
  fastify.decorateRequest('project', null)

  // Every route names its action, and the API's document says who may call it.
  fastify.addHook('onRoute', (route) => {
    const action = route.config?.action
    if (action === undefined || !ACTIONS.includes(action)) {
      throw new Error(`${String(route.method)} ${route.url} names no action of the policy table (config.action)`)
    }
    const roles = `Roles: ${rolesWith(action).join(', ')}.`
    route.schema = { ...route.schema, description: route.schema?.description === undefined ? roles : `${route.schema.description} ${roles}` }
  })

  fastify.addHook('onRequest', async (request, reply) => {
    const token = bearerTokenOf(request.headers.authorization)
    if (token === null) throw new ApiProblem(401, 'Unauthorized', 'this request needs an `Authorization: Bearer <token>` header')
    const authenticated = await authenticator.authenticate(token)
    if ('refused' in authenticated) throw new ApiProblem(401, 'Unauthorized', authenticated.refused)
    const principal = request.principal = authenticated.principal
    const action = request.routeOptions.config.action!
    const named = (request.params as { project?: string }).project
    if (isProjectAction(action)) {
      if (named === undefined) markUnscoped(request, reply)
      else checkProjectRef(named)
      request.project = named === undefined ? DEFAULT_PROJECT : await findProject(fastify.db, named)
      if (request.project === null) throw projectNotFound(named!)
    }
    const decision = decide(principal, action, request.project?.id ?? null)
    if (decision === 'not-found') {
      // Recorded, if at all, as the fleet's: another project's trail never names this token.
      request.project = null
      throw named === undefined
        ? new ApiProblem(404, 'Not Found', `the unscoped paths are the ${DEFAULT_PROJECT_NAME} project's; this token's project is at /v1/projects/{project}/…`)
        : projectNotFound(named)
    }
    if (decision === 'forbidden') {
      const route = `${request.method} ${request.routeOptions.url ?? request.url}`
      throw new ApiProblem(403, 'Forbidden', `${describe(principal)} may not ${ACTION_PHRASES[action]}: ${route} needs a token of role ${rolesWith(action).join(', ')}`)
    }
  })
}, { name: 'authorize', dependencies: ['database'] })

/** A project's name or ID, checked before it is looked up: the route's own validation comes after this hook. */
function checkProjectRef (named: string): void {
  const checked = projectRefSchema.safeParse(named)
  if (!checked.success) {
    const message = checked.error.issues[0]!.message
    throw new ApiProblem(400, 'Bad Request', `params.project: ${message}`, [{ path: 'params.project', message }])
  }
}

function projectNotFound (named: string): ApiProblem {
  return new ApiProblem(404, 'Not Found', `project ${named} does not exist`)
}

/** An unscoped path: the `default` project's, deprecated, and when it ends. */
function markUnscoped (request: FastifyRequest, reply: { header: (name: string, value: string) => unknown }): void {
  reply.header('deprecation', UNSCOPED_PATHS_DEPRECATED)
  reply.header('sunset', UNSCOPED_PATHS_SUNSET)
  const successor = request.url.replace(/^\/v1\//, `/v1/projects/${DEFAULT_PROJECT_NAME}/`)
  reply.header('link', `<${successor}>; rel="successor-version"`)
}
