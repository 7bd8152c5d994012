/**
 * The CLI's HTTP client for the vmplane API: JSON in and out, the bearer token on every request,
 * errors turned into `CliError`s whose exit codes say whether trying again could help.
 *
 * Given several URLs (the API's replicas), a request that gets no answer (connection refused or
 * reset, timeout) or a 502/503/504 from one goes at once to the next, and the one that answers is
 * asked first from then on. When none answers, the round is tried again twice. A 409 with
 * `Retry-After` (an earlier attempt under this invocation's key is still in progress) is asked
 * again as it says, for longer than an API replica's claim on a key outlives the replica
 * (api/plugins/idempotency.ts): an attempt whose replica died is then answered by another. That is
 * safe for mutating requests too: they all carry this invocation's Idempotency-Key, so the API
 * answers a retry with what the first attempt did instead of doing it again.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Connection } from './connection.js'
import { ApiError, CliError, EXIT } from './errors.js'

const REQUEST_TIMEOUT_MS = 15_000
const RETRY_DELAYS_MS = [300, 1000]
const RETRIED_STATUSES = new Set([502, 503, 504])
/** How long a key in progress is waited for: more than a claim's 10 s lease. */
const IN_PROGRESS_PATIENCE_MS = 15_000

/** What asking every URL once came to: an answer, or the last reason none came. */
type Round = { response: Response, url: string } | { error: unknown }

export class ApiClient {
  /** The index of the URL asked first: the last one that answered. */
  private current = 0

  constructor (private readonly connection: Connection, private readonly idempotencyKey: string) {}

  async get<T> (path: string): Promise<T> {
    return await this.request<T>('GET', path)
  }

  /** A GET whose answer is text (a console log). */
  async getText (path: string): Promise<string> {
    return await this.request<string>('GET', path, undefined, {}, 'text')
  }

  /** Where a WebSocket route of the API is, and the headers that open it. */
  webSocket (path: string): { url: string, headers: Record<string, string> } {
    const url = this.connection.urls[this.current]!
    return { url: `${url.replace(/^http/, 'ws')}${path}`, headers: { authorization: `Bearer ${this.connection.token}` } }
  }

  /** A request that changes something: POST or DELETE, with this invocation's Idempotency-Key. */
  async change<T> (method: 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T> {
    return await this.request<T>(method, path, body, { 'idempotency-key': this.idempotencyKey })
  }

  private async request<T> (method: string, path: string, body?: unknown, headers: Record<string, string> = {}, as: 'json' | 'text' = 'json'): Promise<T> {
    const patienceEnds = performance.now() + IN_PROGRESS_PATIENCE_MS
    for (let failures = 0; ;) {
      const round = await this.round(method, path, body, headers)
      const response = 'response' in round ? round.response : null
      const inProgress = response?.status === 409 ? retryAfterSeconds(response.headers.get('retry-after')) : null
      let retryDelay: number | undefined
      if (inProgress !== null && performance.now() < patienceEnds) retryDelay = inProgress * 1000
      else if (response === null || RETRIED_STATUSES.has(response.status)) retryDelay = RETRY_DELAYS_MS[failures++]
      if (retryDelay !== undefined) {
        await response?.body?.cancel()
        await sleep(retryDelay)
        continue
      }
      if (!('response' in round)) throw this.unreachable(round.error)
      return await this.answer<T>(method, path, round.url, round.response, as)
    }
  }

  /** Asks each URL in turn, from the current one, until one answers other than 502/503/504. */
  private async round (method: string, path: string, body: unknown, headers: Record<string, string>): Promise<Round> {
    const { urls } = this.connection
    let last: Round = { error: new Error('no URL') }
    for (let i = 0; i < urls.length; i++) {
      const index = (this.current + i) % urls.length
      const url = urls[index]!
      if ('response' in last) await last.response.body?.cancel()
      try {
        last = { response: await this.fetch(url, method, path, body, headers), url }
      } catch (error) {
        last = { error }
        continue
      }
      if (!RETRIED_STATUSES.has(last.response.status)) {
        this.current = index
        break
      }
    }
    return last
  }

  private async fetch (url: string, method: string, path: string, body: unknown, headers: Record<string, string>): Promise<Response> {
    return await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.connection.token}`,
        accept: 'application/json, application/problem+json, text/plain',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    })
  }

  private async answer<T> (method: string, path: string, url: string, response: Response, as: 'json' | 'text'): Promise<T> {
    const text = await response.text()
    const parsed = parseJson(text)
    if (response.ok && (as === 'text' || response.status === 204)) return text as T
    if (response.ok) {
      if (parsed === undefined) {
        throw new CliError(`${method} ${path}: the API answered ${response.status} with something that is not JSON; is ${url} a vmplane API?`, EXIT.unavailable)
      }
      return parsed as T
    }
    throw new ApiError(response.status, problemDetail(parsed, text, response), retryAfterSeconds(response.headers.get('retry-after')))
  }

  private unreachable (error: unknown): CliError {
    return new CliError(`cannot reach the API at ${this.connection.urls.join(', ')}: ${networkReason(error)}`, EXIT.unavailable)
  }
}

function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** problem+json's `detail`; failing that, whatever else the answer says (a proxy's page, say). */
function problemDetail (parsed: unknown, text: string, response: Response): string {
  if (typeof parsed === 'object' && parsed !== null) {
    const { detail, message } = parsed as { detail?: unknown, message?: unknown }
    if (typeof detail === 'string' && detail !== '') return detail
    if (typeof message === 'string' && message !== '') return message
  }
  const excerpt = text.trim().slice(0, 200)
  return excerpt !== '' && parsed === undefined ? excerpt : `${response.status} ${response.statusText}`
}

/** Retry-After is either seconds or an HTTP date; null when absent or unreadable. */
function retryAfterSeconds (header: string | null): number | null {
  if (header === null) return null
  if (/^\d+$/.test(header.trim())) return Number(header.trim())
  const at = Date.parse(header)
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000))
}

/** fetch hides the reason in `cause` ("connect ECONNREFUSED 127.0.0.1:9"). */
function networkReason (error: unknown): string {
  if (error instanceof Error && error.name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`
  const cause = error instanceof Error ? error.cause : undefined
  if (cause instanceof Error && cause.message !== '') return cause.message
  return error instanceof Error ? error.message : String(error)
}
