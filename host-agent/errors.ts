/**
 * Refusals the agent answers with, each with the HTTP status its API documents. The HTTP layer
 * turns them into `{error, message}` bodies; nothing else needs to know about HTTP. And how any
 * error reads in a VMM's reason or a log line (`describeError`).
 */
import { STATUS_CODES } from 'node:http'

export class AgentError extends Error {
  constructor (readonly status: 400 | 404 | 409 | 426 | 503, message: string) {
    super(message)
    this.name = STATUS_CODES[status] ?? 'Error'
  }
}

export const badRequest = (message: string): AgentError => new AgentError(400, message)
export const notFound = (message: string): AgentError => new AgentError(404, message)
export const conflict = (message: string): AgentError => new AgentError(409, message)
export const unavailable = (message: string): AgentError => new AgentError(503, message)

/** An error's message, for a reason or a log line; anything else thrown, as text. */
export function describeError (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
