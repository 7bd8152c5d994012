/** Builds the API server: Fastify with vmplane's logger, the app, and nothing listening yet. */
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { ApiConfig } from '../config/index.js'
import type { Logger } from '../log/logger.js'
import app from './app.js'
import { clientErrorHandler, frameworkErrors } from './plugins/problem-details.js'

/** A create with 32 KiB of user-data (which JSON may escape to several times that) and 32 SSH keys. */
export const API_BODY_LIMIT_BYTES = 512 * 1024
/**
 * How long the API keeps an idle client connection (Fastify's default, said here because HAProxy
 * must keep its own longer): Node tells clients in `Keep-Alive: timeout=72`, and they reuse an
 * idle connection until then.
 */
export const API_KEEP_ALIVE_SECONDS = 72

export async function buildServer (config: ApiConfig, logger: Logger): Promise<FastifyInstance> {
  const fastify = Fastify({
    // pino's Logger and Fastify's logger interface differ only in their generic parameters.
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: API_BODY_LIMIT_BYTES,
    keepAliveTimeout: API_KEEP_ALIVE_SECONDS * 1000,
    frameworkErrors,
    clientErrorHandler
  })
  await fastify.register(app, config)
  return fastify
}
