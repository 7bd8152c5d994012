/**
 * Every error leaves the agent as `{error, message}` with a 4xx or 503 status, the router's
 * and Node's HTTP layer's included (http/framework-errors.ts): schema
 * violations and malformed bodies are 400 (oversized ones 413), refusals carry their own status
 * and `error` (errors.ts), and images that do not resolve are 400. A route the agent does not
 * have is a 404 whose `error` is the status's name, never one of the agent's own not-found words,
 * so that no client takes it for an answer about a VMM. Anything else is a bug: it is logged with
 * its stack and answered 500 without details.
 */
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod'
import { clientErrorHandler as handleClientError, frameworkErrorDetail } from '../../http/framework-errors.js'
import { AgentError } from '../errors.js'
import { ImageError } from '../images.js'

function send (reply: FastifyReply, status: number, message: string, error = STATUS_CODES[status] ?? 'Error'): FastifyReply {
  return reply.code(status).send({ error, message })
}

export function errorHandler (err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (hasZodFastifySchemaValidationErrors(err)) {
    const problems = err.validation.map((issue) => `${issue.instancePath || '/'} ${issue.message}`)
    return send(reply, 400, `invalid ${err.validationContext ?? 'request'}: ${problems.join('; ')}`)
  }
  if (err instanceof AgentError) return send(reply, err.status, err.message, err.code)
  if (err instanceof ImageError) return send(reply, 400, err.message)
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return send(reply, err.statusCode, err.message)
  }
  request.log.error({ err }, 'request failed')
  return send(reply, 500, 'internal error; see the agent log')
}

export function notFoundHandler (request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return send(reply, 404, `no route ${request.method} ${request.url}`)
}

/** Fastify's `frameworkErrors`: the router's errors (a malformed URL, a path parameter too long). */
export function frameworkErrors (err: FastifyError, _request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return send(reply, err.statusCode ?? 400, frameworkErrorDetail(err))
}

/** Fastify's `clientErrorHandler`: a request Node's HTTP parser refused, answered on the socket. */
export const clientErrorHandler = handleClientError((status, message) => ({
  contentType: 'application/json',
  text: JSON.stringify({ error: STATUS_CODES[status] ?? 'Error', message })
}))
