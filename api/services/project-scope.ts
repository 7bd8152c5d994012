/**
 * What keeps a project's routes to its own resources (docs/design.md §18). The policy decides
 * whether a token may act in the project its path names (api/plugins/auth.ts); these check that
 * the resource the path names is that project's. One of another project answers exactly as one
 * that does not exist: 404, with the same words.
 */
import type { FastifyRequest } from 'fastify'
import { projectOfInstance } from '../../db/instances.js'
import type { Queryable } from '../../db/pool.js'
import { ApiProblem } from '../plugins/problem-details.js'

export function instanceNotFound (id: string): ApiProblem {
  return new ApiProblem(404, 'Not Found', `instance ${id} does not exist`)
}

/** Throws the 404 of a missing instance unless the instance is the request's project's (or does not exist: the route says so). */
export async function checkInstanceInProject (db: Queryable, request: FastifyRequest, instanceId: string): Promise<void> {
  const owner = await projectOfInstance(db, instanceId)
  if (owner !== null && owner !== request.project!.id) throw instanceNotFound(instanceId)
}

/** A preHandler for routes whose `:id` is an instance: the instance must be the request's project's. */
export function instanceOfTheProject (db: Queryable) {
  return async (request: FastifyRequest): Promise<void> => {
    const { id } = request.params as { id?: string }
    if (id !== undefined) await checkInstanceInProject(db, request, id)
  }
}
