/**
 * `/v1/projects/{project}/instances` (and the deprecated unscoped `/v1/instances`, the `default`
 * project's): create, read, start, stop, reboot, migrate and delete a project's instances.
 */
import type { FastifyReply } from 'fastify'
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders, idParamsSchema } from '../schemas/common.js'
import {
  acceptedSchema,
  createInstanceBody,
  deleteInstanceQuery,
  eventListSchema,
  instanceListSchema,
  instanceSchema,
  listEventsQuery,
  listInstancesQuery,
  stopInstanceBody,
  waitQuery
} from '../schemas/instances.js'
import { migrateBody, migrationListSchema, migrationParamsSchema } from '../schemas/migrations.js'
import { paramsIn, scopeParams, type RouteScope } from '../schemas/projects.js'
import type { Accepted } from '../services/instance-requests.js'
import { waitForOperation } from '../services/operation-waiter.js'
import { instanceOfTheProject } from '../services/project-scope.js'
import type { Principal } from '../../domain/access-policy.js'

const tags = ['instances']
const acceptedResponses = { 200: acceptedSchema, 202: acceptedSchema }

const read = { action: 'project.read' as const }
const write = { action: 'project.write' as const }

const routes: FastifyPluginAsyncZod<RouteScope> = async (fastify, scope) => {
  const requests = fastify.instanceRequests
  const withId = paramsIn(scope, idParamsSchema)
  const withMigration = paramsIn(scope, migrationParamsSchema)
  const inScope = scopeParams(scope)
  fastify.addHook('preHandler', instanceOfTheProject(fastify.db))

  /**
   * 202 when an operation was started, 200 when nothing needed doing; with `?wait=`, 200 once
   * the operation has ended (its outcome in the body), or 202 if it is still running.
   */
  async function send (reply: FastifyReply, wait: number | undefined, pending: Promise<Accepted>) {
    let accepted = await pending
    if (wait !== undefined && wait > 0) {
      const gone = new AbortController()
      reply.raw.once('close', () => gone.abort())
      accepted = await waitForOperation(fastify.instancesRepository, fastify.operationFinishes, accepted, wait, gone.signal)
    }
    const { status, ...body } = accepted
    return await reply.code(status).send(body)
  }

  fastify.post('/instances', {
    config: write,
    schema: { tags, summary: 'Create an instance (and start it, unless start is false), charged to the project\'s quotas', ...inScope, headers: idempotencyHeaders, querystring: waitQuery, body: createInstanceBody, response: acceptedResponses }
  }, async (request, reply) => await send(reply, request.query.wait, requests.create(request.project!.id, request.body, request.newId)))

  fastify.get('/instances', {
    config: read,
    schema: { tags, summary: "List the project's instances, oldest first", ...inScope, querystring: listInstancesQuery, response: { 200: instanceListSchema } }
  }, async (request) => await fastify.instancesRepository.list(request.project!.id, request.query))

  fastify.get('/instances/:id', {
    config: read,
    schema: { tags, summary: 'Get an instance', params: withId, response: { 200: instanceSchema } }
  }, async (request) => {
    const instance = await fastify.instancesRepository.find(request.params.id)
    if (instance === null) throw new ApiProblem(404, 'Not Found', `instance ${request.params.id} does not exist`)
    return instance
  })

  fastify.get('/instances/:id/events', {
    config: read,
    schema: {
      tags,
      summary: "An instance's history: every state change and why, newest first",
      params: withId,
      querystring: listEventsQuery,
      response: { 200: eventListSchema }
    }
  }, async (request) => {
    const events = await fastify.instancesRepository.listEvents(request.params.id, request.query)
    if (events === null) throw new ApiProblem(404, 'Not Found', `instance ${request.params.id} does not exist`)
    return events
  })

  fastify.post('/instances/:id/start', {
    config: write,
    schema: { tags, summary: 'Start a stopped or failed instance', headers: idempotencyHeaders, params: withId, querystring: waitQuery, response: acceptedResponses }
  }, async (request, reply) => await send(reply, request.query.wait, requests.start(request.params.id, request.newId)))

  fastify.post('/instances/:id/stop', {
    config: write,
    schema: {
      tags,
      summary: 'Stop an instance: ACPI power-off, then kill its VMM when the grace period ends. Preempts a start or reboot in flight.',
      headers: idempotencyHeaders,
      params: withId,
      querystring: waitQuery,
      body: stopInstanceBody,
      response: acceptedResponses
    }
  }, async (request, reply) => await send(reply, request.query.wait, requests.stop(request.params.id, request.body?.graceSeconds, request.newId)))

  fastify.post('/instances/:id/reboot', {
    config: write,
    schema: { tags, summary: 'Reboot a running instance', headers: idempotencyHeaders, params: withId, querystring: waitQuery, response: acceptedResponses }
  }, async (request, reply) => await send(reply, request.query.wait, requests.reboot(request.params.id, request.newId)))

  fastify.post('/instances/:id/migrate', {
    config: write,
    schema: {
      tags,
      summary: 'Live-migrate a running instance to another host (one named, or one placement chooses). Cancellable until its commit point.',
      headers: idempotencyHeaders,
      params: withId,
      querystring: waitQuery,
      body: migrateBody,
      response: acceptedResponses
    }
  }, async (request, reply) => await send(reply, request.query.wait, requests.migrate(request.params.id, request.body?.targetHostId, request.newId)))

  fastify.post('/instances/:id/migrate/cancel', {
    config: write,
    schema: {
      tags,
      summary: "Cancel the instance's live migration: its target is killed and the VM stays on the source, unless the target already has it",
      params: withId,
      querystring: waitQuery,
      response: { 202: acceptedSchema, 200: acceptedSchema }
    }
  }, async (request, reply) => await send(reply, request.query.wait, requests.cancelMigration(request.params.id, undefined, cancelledBy(request.principal))))

  fastify.get('/instances/:id/migrations', {
    config: read,
    schema: { tags, summary: "An instance's live migrations, newest first", params: withId, response: { 200: migrationListSchema } }
  }, async (request) => {
    const items = await fastify.instancesRepository.listMigrations(request.params.id)
    if (items === null) throw new ApiProblem(404, 'Not Found', `instance ${request.params.id} does not exist`)
    return { items }
  })

  fastify.delete('/instances/:id/migrations/:migrationId', {
    config: write,
    schema: {
      tags,
      summary: 'Cancel this live migration (as POST …/migrate/cancel does for the live one)',
      params: withMigration,
      querystring: waitQuery,
      response: { 202: acceptedSchema, 200: acceptedSchema }
    }
  }, async (request, reply) => await send(reply, request.query.wait, requests.cancelMigration(request.params.id, request.params.migrationId, cancelledBy(request.principal))))

  fastify.delete('/instances/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Delete an instance: stop it (killing its VMM when the grace period ends), then destroy it',
      headers: idempotencyHeaders,
      params: withId,
      querystring: deleteInstanceQuery,
      response: acceptedResponses
    }
  }, async (request, reply) => await send(reply, request.query.wait, requests.delete(request.params.id, request.query.graceSeconds, request.newId)))
}

/** Who cancelled, as the migration's events say it. */
function cancelledBy (principal: Principal): string {
  return `an API client (token ${principal.tokenName})`
}

export default routes
