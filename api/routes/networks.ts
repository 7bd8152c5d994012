/**
 * `/v1/projects/{project}/networks` (and the unscoped `/v1/networks`, the `default` project's): a
 * project's address spaces, which its instances' interfaces are on (db/networks.ts).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { z } from 'zod'
import { deleteNetwork, findNetwork, insertNetwork, listNetworks } from '../../db/networks.js'
import { firstHostAddress, isHostAddressOf, parseCidr } from '../../domain/ipv4.js'
import { ApiProblem } from '../plugins/problem-details.js'
import { idempotencyHeaders } from '../schemas/common.js'
import { createNetworkBody, networkListSchema, networkParamsSchema, networkSchema } from '../schemas/networks.js'
import { paramsIn, scopeParams, type RouteScope } from '../schemas/projects.js'

const tags = ['networks']

function problem (status: 404 | 409 | 422, path: string, message: string): ApiProblem {
  const title = { 404: 'Not Found', 409: 'Conflict', 422: 'Unprocessable Content' }[status]
  return new ApiProblem(status, title, `${path}: ${message}`, [{ path, message }])
}

const routes: FastifyPluginAsyncZod<RouteScope> = async (fastify, scope) => {
  const { db } = fastify
  const withNetwork = paramsIn(scope, networkParamsSchema)

  fastify.post('/networks', {
    config: { action: 'project.write' },
    schema: { tags, summary: 'Create a network', ...scopeParams(scope), headers: idempotencyHeaders, body: createNetworkBody, response: { 201: networkSchema } }
  }, async (request, reply) => {
    const { name, cidr, outbound } = request.body
    const range = parseCidr(cidr)
    const gateway = request.body.gateway ?? firstHostAddress(range)
    if (!isHostAddressOf(range, gateway)) throw problem(422, 'body.gateway', `${gateway} is not an address of ${cidr} other than its network and broadcast addresses`)
    const created = await insertNetwork(db, { id: request.newId('network'), projectId: request.project!.id, name, cidr, gateway, outbound })
    if ('kind' in created) {
      if (created.kind === 'project-gone') throw new ApiProblem(404, 'Not Found', 'the project was deleted')
      throw created.kind === 'name-taken'
        ? problem(409, 'body.name', `a network named ${name} already exists`)
        : problem(409, 'body.cidr', `${cidr} overlaps network ${created.with}`)
    }
    return await reply.code(201).send(created)
  })

  fastify.get('/networks', {
    config: { action: 'project.read' },
    schema: { tags, summary: "List the project's networks, by name", ...scopeParams(scope), response: { 200: networkListSchema } }
  }, async (request) => ({ items: await listNetworks(db, request.project!.id) }))

  fastify.get('/networks/:network', {
    config: { action: 'project.read' },
    schema: { tags, summary: 'Get a network by name or ID', params: withNetwork, response: { 200: networkSchema } }
  }, async (request) => {
    const network = await findNetwork(db, request.project!.id, request.params.network)
    if (network === null) throw problem(404, 'params.network', `no network ${request.params.network}`)
    return network
  })

  fastify.delete('/networks/:network', {
    config: { action: 'project.write' },
    schema: { tags, summary: 'Delete a network no live interface uses', headers: idempotencyHeaders, params: withNetwork, response: { 204: z.null().describe('deleted') } }
  }, async (request, reply) => {
    const network = await findNetwork(db, request.project!.id, request.params.network)
    if (network === null) throw problem(404, 'params.network', `no network ${request.params.network}`)
    const outcome = await deleteNetwork(db, network.id)
    if (outcome === 'missing') throw problem(404, 'params.network', `no network ${request.params.network}`)
    if (outcome !== 'deleted') throw problem(409, 'params.network', `network ${network.name} still has ${outcome.inUse} live interface(s); delete their instances first`)
    return await reply.code(204).send(null)
  })
}

export default routes
