/**
 * Refusals the agent answers with, each with the HTTP status its API documents. The HTTP layer
 * turns them into `{error, message}` bodies; nothing else needs to know about HTTP. And how any
 * error reads in a VMM's reason or a log line (`describeError`).
 *
 * A body's `error` is the status's name (`Conflict`), except in the agent's own 404s, which name
 * what it has none of (`VmmNotFound`, `StrayNotFound`): the control plane takes a VMM for gone
 * only on that word, never on a 404 from a route the agent does not have (docs/design.md §5).
 */
import { STATUS_CODES } from 'node:http'
import { AGENT_NOT_FOUND_ERRORS } from '../domain/errors.js'

export class AgentError extends Error {
  constructor (
    readonly status: 400 | 404 | 409 | 426 | 503,
    message: string,
    /** The body's `error`. */
    readonly code: string = STATUS_CODES[status] ?? 'Error'
  ) {
    super(message)
    this.name = code
  }
}

/** The agent's answer that it has no such VMM, or no such stray process. */
export const notFound = (what: keyof typeof AGENT_NOT_FOUND_ERRORS, message: string): AgentError =>
  new AgentError(404, message, AGENT_NOT_FOUND_ERRORS[what])
export const conflict = (message: string): AgentError => new AgentError(409, message)
export const unavailable = (message: string): AgentError => new AgentError(503, message)

/** An error's message, for a reason or a log line; anything else thrown, as text. */
export function describeError (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
