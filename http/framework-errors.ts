/**
 * The errors no route handles, answered in each server's own error format: Fastify's router
 * errors (`frameworkErrors`: a malformed URL, a path parameter too long) and requests Node's HTTP
 * parser refuses (`clientErrorHandler`: not HTTP, headers too large, a timeout). Fastify's
 * defaults answer them in a format of their own, which neither the API nor the agent documents.
 */
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError } from 'fastify'

/** What to say about a router error, in the words of the request it refused. */
export function frameworkErrorDetail (err: FastifyError): string {
  if (err.code === 'FST_ERR_BAD_URL') return 'the URL is not valid: a percent-encoded sequence is not UTF-8'
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return 'a path parameter is longer than 100 characters'
  return err.message
}

/** An error body, as a server writes it: its content type and its text. */
export type ErrorBody = (status: number, detail: string) => { contentType: string, text: string }

/** A `clientErrorHandler` that answers on the socket with `body`, then closes it. */
export function clientErrorHandler (body: ErrorBody) {
  return function handleClientError (err: NodeJS.ErrnoException, socket: Socket): void {
    // A reset connection has nobody left to answer.
    if (err.code === 'ECONNRESET' || socket.destroyed) return
    const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400
    const detail = status === 408
      ? 'the request was not received in time'
      : status === 431 ? 'the request\'s headers are larger than the server accepts' : `the request is not valid HTTP (${err.code ?? 'unknown'})`
    const { contentType, text } = body(status, detail)
    if (socket.writable) {
      socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${contentType}\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`)
    }
    socket.destroy()
  }
}
