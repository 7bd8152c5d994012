/**
 * `/v1/projects`: the projects that own instances and networks, and their quotas (docs/design.md
 * §18). Fleet operators make, delete and set the quotas of projects; a project's tokens see their
 * own project only.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { deleteProject, findProject, insertProject, listProjects } from '../../db/projects.js'
import { readQuotas, setQuotas } from '../../db/quotas.js'
import { DEFAULT_PROJECT_ID } from '../../domain/projects.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders } from '../schemas/common.js'
import { createProjectBody, projectListSchema, projectParamsSchema, projectSchema, quotasSchema, setQuotasBody } from '../schemas/projects.js'

const tags = ['projects']

function notFound (named: string): ApiProblem {
  return new ApiProblem(404, 'Not Found', `project ${named} does not exist`)
}

const routes: FastifyPluginAsyncZod = async (fastify) => {
  const { db } = fastify

  /**
   * A project a fleet route names (a project's routes have theirs resolved by the policy's hook);
   * the route makes it the request's, so the change is in that project's audit trail too.
   */
  async function named (project: string) {
    const found = await findProject(db, project)
    if (found === null) throw notFound(project)
    return found
  }

  fastify.get('/projects', {
    config: { action: 'projects.list' },
    schema: { tags, summary: 'List the projects this token may see, by name: every one for a fleet token, its own for a project\'s', response: { 200: projectListSchema } }
  }, async (request) => ({ items: await listProjects(db, request.principal.projectId) }))

  fastify.post('/projects', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: 'Create a project, with no quota limits', headers: idempotencyHeaders, body: createProjectBody, response: { 201: projectSchema } }
  }, async (request, reply) => {
    const created = await insertProject(db, { id: request.newId('project'), name: request.body.name })
    if (created === 'name-taken') throw new ApiProblem(409, 'Conflict', `body.name: a project named ${request.body.name} already exists`, [{ path: 'body.name', message: `a project named ${request.body.name} already exists` }])
    request.project = created
    return await reply.code(201).send(created)
  })

  fastify.get('/projects/:project', {
    config: { action: 'project.read' },
    schema: { tags, summary: 'Get a project by name or ID', params: projectParamsSchema, response: { 200: projectSchema } }
  }, async (request) => await named(request.project!.id))

  fastify.delete('/projects/:project', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: 'Delete a project that owns no live instance or network; its tokens are revoked', headers: idempotencyHeaders, params: projectParamsSchema, response: { 204: z.null().describe('deleted') } }
  }, async (request, reply) => {
    const project = request.project = await named(request.params.project)
    if (project.id === DEFAULT_PROJECT_ID) throw new ApiProblem(409, 'Conflict', 'the default project holds what the unscoped paths make: it is never deleted')
    const outcome = await deleteProject(db, project.id)
    if (outcome === 'missing') throw notFound(request.params.project)
    if (outcome !== 'deleted') throw new ApiProblem(409, 'Conflict', `project ${project.name} still owns ${outcome.instances} live instance(s) and ${outcome.networks} network(s); delete them first`)
    return await reply.code(204).send(null)
  })

  fastify.get('/projects/:project/quotas', {
    config: { action: 'project.read' },
    schema: { tags, summary: "The project's quotas and what it uses", params: projectParamsSchema, response: { 200: quotasSchema } }
  }, async (request) => {
    const quotas = await readQuotas(db, request.project!.id)
    if (quotas === null) throw notFound(request.params.project)
    return quotas
  })

  fastify.put('/projects/:project/quotas', {
    config: { action: 'fleet.write' },
    schema: { tags, summary: "Set the project's quotas (null: no limit; left out: unchanged). A limit below the use refuses new instances until enough are deleted.", headers: idempotencyHeaders, params: projectParamsSchema, body: setQuotasBody, response: { 200: quotasSchema } }
  }, async (request) => {
    const project = request.project = await named(request.params.project)
    const quotas = await setQuotas(db, project.id, request.body)
    if (quotas === null) throw notFound(request.params.project)
    return quotas
  })
}

export default routes
