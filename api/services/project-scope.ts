/**
 * What keeps a project's routes to its own resources (docs/design.md §18). The policy decides
 * whether a token may act in the project its path names (api/plugins/auth.ts); this checks that
 * the instance the path names is that project's. One of another project answers exactly as one
 * that does not exist: 404, with the same words.
 */
import type { FastifyRequest } from 'fastify'
import { projectOfInstance } from '../../db/instances.js'
import type { Queryable } from '../../db/pool.js'
import { ApiProblem } from '../plugins/problem-details.js'

/**
 * A preHandler for routes whose `:id` is an instance: one of another project is refused as
 * missing; a missing one is left to the route, which says so.
 */
export function instanceOfTheProject (db: Queryable) {
  return async (request: FastifyRequest): Promise<void> => {
    const { id } = request.params as { id?: string }
    if (id === undefined) return
    const owner = await projectOfInstance(db, id)
    if (owner !== null && owner !== request.project!.id) throw new ApiProblem(404, 'Not Found', `instance ${id} does not exist`)
  }
}
