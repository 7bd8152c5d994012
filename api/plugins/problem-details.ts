/**
 * Every error leaves the API as RFC 9457 problem details (`application/problem+json`), naming
 * what was wrong: each invalid field for validation errors, the state and the operation in flight
 * for conflicts. A 5xx never reveals internals; it is logged instead.
 *
 * Three ways in: the error handler of the app (this plugin), and the errors no route handles
 * (http/framework-errors.ts), through Fastify options set where the server is built
 * (api/server.ts).
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod'
import { clientErrorHandler as handleClientError, frameworkErrorDetail } from '../../http/framework-errors.js'

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Payload Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  426: 'Upgrade Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable'
}

/** An error the API means to return as it is. */
export class ApiProblem extends Error {
  constructor (
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly errors?: Array<{ path: string, message: string }>
  ) {
    super(detail)
  }
}

/** PostgreSQL shutting down, crashed, or not yet accepting connections (class 57, operator intervention). */
const POSTGRES_RESTARTING = new Set(['57P01', '57P02', '57P03'])
const GRPC_UNAVAILABLE = 14

/**
 * PostgreSQL or Temporal unreachable, restarting or not up yet: the caller's to retry shortly
 * (503), not our bug (500).
 */
export function isDependencyUnavailable (err: unknown): boolean {
  const { code, message } = err as { code?: unknown, message?: unknown }
  return code === GRPC_UNAVAILABLE || code === 'ECONNREFUSED' || code === 'ECONNRESET' ||
    (typeof code === 'string' && POSTGRES_RESTARTING.has(code)) ||
    // What pg says of a query in flight when its server process dies, and of one sent after.
    message === 'Connection terminated unexpectedly' || message === 'Client has encountered a connection error and is not queryable'
}

function send (reply: FastifyReply, request: FastifyRequest, problem: ApiProblem): FastifyReply {
  return reply
    .code(problem.status)
    .type('application/problem+json')
    .send({
      type: 'about:blank',
      title: problem.title,
      status: problem.status,
      detail: problem.detail,
      instance: request.url,
      ...(problem.errors === undefined ? {} : { errors: problem.errors })
    })
}

function toProblem (err: FastifyError): ApiProblem {
  if (err instanceof ApiProblem) return err
  if (isDependencyUnavailable(err)) return new ApiProblem(503, 'Service Unavailable', 'a service vmplane depends on is unreachable; retry shortly')
  if (hasZodFastifySchemaValidationErrors(err)) {
    // Fastify names the query string `querystring`; people call it the query.
    const where = err.validationContext === 'querystring' ? 'query' : err.validationContext
    const errors = err.validation.map((v) => ({
      path: [where, ...(v.instancePath.split('/').filter((p) => p !== ''))].join('.'),
      message: v.message ?? 'is invalid'
    }))
    return new ApiProblem(400, 'Bad Request', errors.map((e) => `${e.path}: ${e.message}`).join('; '), errors)
  }
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) return new ApiProblem(status, TITLES[status] ?? 'Bad Request', err.message)
  return new ApiProblem(status, TITLES[status] ?? 'Internal Server Error', 'the request could not be completed; see the API log')
}

/** Fastify's `frameworkErrors`: the router's errors, met before any route or hook runs. */
export function frameworkErrors (err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return send(reply, request, toProblem(Object.assign(err, { message: frameworkErrorDetail(err) })))
}

/** Fastify's `clientErrorHandler`: a request Node's HTTP parser refused, answered on the socket. */
export const clientErrorHandler = handleClientError((status, detail) => ({
  contentType: 'application/problem+json',
  text: JSON.stringify({ type: 'about:blank', title: TITLES[status], status, detail })
}))

export default fp(async (fastify) => {
  fastify.setErrorHandler((err: FastifyError, request, reply) => {
    const problem = toProblem(err)
    // Our own 503s (not ready, a dependency down) say what is wrong; anything else is a bug.
    if (isDependencyUnavailable(err)) request.log.warn({ err }, 'request failed: a dependency is unreachable')
    else if (problem.status >= 500 && !(err instanceof ApiProblem)) request.log.error({ err }, 'request failed')
    return send(reply, request, problem)
  })
  fastify.setNotFoundHandler((request, reply) =>
    send(reply, request, new ApiProblem(404, 'Not Found', `no route ${request.method} ${request.url}`)))
}, { name: 'problem-details' })
