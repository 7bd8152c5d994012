/**
 * Sends contract requests as they are written (node:http, which leaves an invalid path or query
 * alone where fetch would normalise it), holds each answer to the document, and counts.
 */
import { Agent, request as httpRequest } from 'node:http'
import type { Answer, Contract, Operation } from './document.js'
import { write, type ContractRequest, type RequestMaker } from './requests.js'

const agent = new Agent({ keepAlive: true, maxSockets: 4 })

/** How long a request cut off while it was written may still get the server's answer. */
const ANSWER_AFTER_CUT_MS = 1_000

/**
 * Sends a request and resolves with the answer. A server may answer a request before it has read
 * all of it (a body over its limit: 413) and close the connection: the rest of the write fails
 * (EPIPE, ECONNRESET), and the answer, once it has arrived whole, is the one counted (in CI a
 * 413 was lost to such an EPIPE). A request cut off on a kept-alive connection the server had
 * closed, with no answer, is sent again once on a new one, as Node's documentation advises: the
 * server never read it.
 */
export async function send (baseUrl: string, request: ContractRequest): Promise<Answer> {
  try {
    return await sendOnce(baseUrl, request, agent)
  } catch (error) {
    if (!(error instanceof CutOff && error.reusedSocket)) throw error
    return await sendOnce(baseUrl, request, false)
  }
}

class CutOff extends Error {
  constructor (cause: NodeJS.ErrnoException, readonly reusedSocket: boolean) {
    super(`the connection was cut off while the request was written (${cause.code}), and no answer came`, { cause })
  }
}

function sendOnce (baseUrl: string, request: ContractRequest, via: Agent | false): Promise<Answer> {
  const { hostname, port } = new URL(baseUrl)
  // Node frames a DELETE's body with neither Content-Length nor chunking unless told: the server
  // would read the request as bodyless and the body as the next request.
  const headers = request.body === null ? request.headers : { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) }
  return new Promise((resolve, reject) => {
    let answered = false
    const outgoing = httpRequest({ agent: via, hostname, port, method: request.method, path: request.url, headers }, (response) => {
      answered = true
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      // 'close' follows 'end', or a cut connection: the answer counts if it arrived whole.
      response.on('error', () => {})
      response.on('close', () => {
        if (!response.complete) {
          reject(new Error(`the answer to ${request.method} ${request.url} was cut off`))
          return
        }
        resolve({ status: response.statusCode ?? 0, contentType: response.headers['content-type'] ?? null, body: Buffer.concat(chunks).toString() })
      })
    })
    outgoing.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') {
        reject(error)
        return
      }
      setTimeout(() => { if (!answered) reject(new CutOff(error, outgoing.reusedSocket)) }, ANSWER_AFTER_CUT_MS)
    })
    outgoing.end(request.body ?? undefined)
  })
}

/** What a run of requests got: counts by route and status, and every breach of the contract. */
export class ContractRun {
  readonly breaches: string[] = []
  private readonly counts = new Map<string, Map<number, number>>()
  total = 0

  constructor (private readonly contract: Contract, private readonly baseUrl: string) {}

  /** Sends a request, and records what is wrong with its answer, including what `expect` says. */
  async run (request: ContractRequest, expect: (status: number) => string | null): Promise<Answer> {
    const answer = await send(this.baseUrl, request)
    this.total++
    const route = `${request.method} ${request.operation.path}`
    const byStatus = this.counts.get(route) ?? new Map<number, number>()
    byStatus.set(answer.status, (byStatus.get(answer.status) ?? 0) + 1)
    this.counts.set(route, byStatus)
    const wrong = [expect(answer.status), ...this.contract.breaches(request.operation, answer)].filter((b) => b !== null)
    for (const breach of wrong) this.breaches.push(`${request.method} ${request.url.slice(0, 120)} (${request.variation}): ${breach}`)
    return answer
  }

  /**
   * Valid requests: `rounds` rounds over every operation, in the order `rank` gives (creates
   * first, say, so that later requests have something to act on); each answer must not be a 5xx
   * and goes to `onAnswer`.
   */
  async validRounds (maker: RequestMaker, rounds: number, rank: (operation: Operation) => number, onAnswer: (operation: Operation, answer: Answer) => void): Promise<void> {
    const ordered = [...this.contract.operations].sort((a, b) => rank(a) - rank(b))
    for (let round = 0; round < rounds; round++) {
      for (const operation of ordered) onAnswer(operation, await this.run(write(operation, 'valid', maker.valid(operation)), answered))
    }
  }

  /** Every hostile variation of `bases` valid requests of every operation; each must be refused. */
  async hostileVariations (maker: RequestMaker, bases: number): Promise<void> {
    for (const operation of this.contract.operations) {
      for (let base = 0; base < bases; base++) {
        for (const request of maker.hostile(operation, maker.valid(operation))) await this.run(request, refused)
      }
    }
  }

  /** Routes of the document that no request reached. */
  unreached (): string[] {
    return this.contract.operations.map((o) => `${o.method} ${o.path}`).filter((route) => !this.counts.has(route))
  }

  /** The counts, one line per route: `GET /v1/instances  200×12 400×80 …`. */
  report (): string {
    const width = Math.max(...[...this.counts.keys()].map((route) => route.length))
    return [...this.counts.entries()].sort().map(([route, byStatus]) => {
      const statuses = [...byStatus.entries()].sort(([a], [b]) => a - b).map(([status, n]) => `${status}×${n}`).join(' ')
      return `${route.padEnd(width)}  ${statuses}`
    }).join('\n')
  }
}

/** A refused request: a 4xx. */
export function refused (status: number): string | null {
  return status >= 400 && status < 500 ? null : `a hostile request was answered ${status}, not refused with a 4xx`
}

/** A valid request: anything but a 5xx (409, 404 and the like are answers too). */
export function answered (status: number): string | null {
  return status < 500 ? null : `answered ${status}`
}
