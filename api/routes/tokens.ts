/**
 * API tokens (docs/design.md §18): a project's, made, listed and revoked by its admins (and the
 * fleet's operators), at `/v1/projects/{project}/tokens`; the fleet's, by its operators, at
 * `/v1/tokens`. A new token is shown once, in the answer that makes it; only its hash is kept.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { insertToken, listTokens, revokeToken, type TokenRow } from '../../db/api-tokens.js'
import type { Role } from '../../domain/access-policy.js'
import { makeToken } from '../auth/token-secrets.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders } from '../schemas/common.js'
import {
  createFleetTokenBody, createProjectTokenBody, newTokenSchema, projectParamsSchema, tokenListSchema, tokenParamsSchema, tokenSchema
} from '../schemas/projects.js'

const tags = ['tokens']
const DAY_MS = 86_400_000

function view (row: TokenRow) {
  const { projectId, ...rest } = row
  return { ...rest, project: projectId }
}

const routes: FastifyPluginAsyncZod = async (fastify) => {
  const { db } = fastify

  /** Makes a token of the project (null: the fleet's); the answer carries the token, this once. */
  async function make (projectId: string | null, body: { name: string, role: Role, expiresInDays: number }, createdBy: string) {
    const made = await makeToken()
    const row = await insertToken(db, {
      id: made.id,
      name: body.name,
      projectId,
      role: body.role,
      createdBy,
      expiresAt: new Date(Date.now() + body.expiresInDays * DAY_MS).toISOString(),
      salt: made.salt,
      hash: made.hash
    })
    return { ...view(row), token: made.token }
  }

  async function revoke (tokenId: string, projectId: string | null) {
    const revoked = await revokeToken(db, tokenId, projectId)
    if (revoked === null) throw new ApiProblem(404, 'Not Found', `token ${tokenId} does not exist`)
    return view(revoked)
  }

  fastify.post('/projects/:project/tokens', {
    config: { action: 'project.tokens' },
    schema: { tags, summary: 'Make a token of the project, with a role; the answer shows it this once', headers: idempotencyHeaders, params: projectParamsSchema, body: createProjectTokenBody, response: { 201: newTokenSchema } }
  }, async (request, reply) => await reply.code(201).send(await make(request.project!.id, request.body, request.principal.tokenId)))

  fastify.get('/projects/:project/tokens', {
    config: { action: 'project.tokens' },
    schema: { tags, summary: "The project's tokens, newest first, revoked and expired ones too (never their secrets)", params: projectParamsSchema, response: { 200: tokenListSchema } }
  }, async (request) => ({ items: (await listTokens(db, request.project!.id)).map(view) }))

  fastify.delete('/projects/:project/tokens/:tokenId', {
    config: { action: 'project.tokens' },
    schema: { tags, summary: 'Revoke a token of the project: refused from its next request on', headers: idempotencyHeaders, params: projectParamsSchema.extend(tokenParamsSchema.shape), response: { 200: tokenSchema } }
  }, async (request) => await revoke(request.params.tokenId, request.project!.id))

  fastify.post('/tokens', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: 'Make a fleet token, with a fleet role; the answer shows it this once', headers: idempotencyHeaders, body: createFleetTokenBody, response: { 201: newTokenSchema } }
  }, async (request, reply) => await reply.code(201).send(await make(null, request.body, request.principal.tokenId)))

  fastify.get('/tokens', {
    config: { action: 'fleet.read' },
    schema: { tags, summary: "The fleet's tokens, newest first (never their secrets)", response: { 200: tokenListSchema } }
  }, async () => ({ items: (await listTokens(db, null)).map(view) }))

  fastify.delete('/tokens/:tokenId', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: 'Revoke a fleet token', headers: idempotencyHeaders, params: tokenParamsSchema, response: { 200: tokenSchema } }
  }, async (request) => await revoke(request.params.tokenId, null))
}

export default routes
