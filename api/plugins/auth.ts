/**
 * Bearer-token authentication. Registered inside the `/v1` scope, whose routes it guards
 * (fastify-plugin lifts the hook into that scope, and Fastify's encapsulation keeps it out of the
 * root): health checks and the API's own documentation stay public.
 */
import { timingSafeEqual } from 'node:crypto'
import fp from 'fastify-plugin'
import { ApiProblem } from './problem-details.js'

function sameToken (given: string, expected: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

export const requireToken = fp<{ token: string }>(async (fastify, opts) => {
  fastify.addHook('onRequest', async (request) => {
    const header = request.headers.authorization
    const token = header?.startsWith('Bearer ') === true ? header.slice('Bearer '.length) : null
    if (token === null) throw new ApiProblem(401, 'Unauthorized', 'this request needs an `Authorization: Bearer <token>` header')
    if (!sameToken(token, opts.token)) throw new ApiProblem(401, 'Unauthorized', 'the bearer token is not valid')
  })
}, { name: 'require-token' })
