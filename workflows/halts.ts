/**
 * The stops and deletes an instance's execution has received and not yet carried out. One halt
 * serves them all: the earliest deadline is the one in force (a second stop with a shorter grace
 * shortens the running one, never the reverse), and a delete among them makes the halt a delete.
 */
import { haltDeadlineOf, type HaltRequest } from '../domain/requests.js'

export class HaltBook {
  private readonly requests: HaltRequest[] = []

  /** Takes in a request; false if it was already here (a signal delivered twice). */
  receive (request: HaltRequest): boolean {
    if (this.requests.some((h) => h.operationId === request.operationId)) return false
    this.requests.push(request)
    return true
  }

  get pending (): readonly HaltRequest[] {
    return this.requests
  }

  get any (): boolean {
    return this.requests.length > 0
  }

  /** The earliest deadline of the halts received, in ms since the epoch; null when there is none. */
  get deadline (): number | null {
    return this.requests.length === 0 ? null : haltDeadlineOf(this.earliest())
  }

  /** The halt whose deadline is the one in force. */
  earliest (): HaltRequest {
    return this.requests.reduce((a, b) => haltDeadlineOf(b) < haltDeadlineOf(a) ? b : a)
  }

  kind (): 'stop' | 'delete' {
    return this.requests.some((h) => h.kind === 'delete') ? 'delete' : 'stop'
  }

  /** The operator's words when one of the halts was a force-stop. */
  forcedBy (): string | undefined {
    return this.requests.map((h) => h.kind === 'stop' ? h.forcedBy : undefined).find((by) => by !== undefined)
  }

  /** Hands over every request, leaving none. */
  takeAll (): HaltRequest[] {
    return this.requests.splice(0)
  }

  /** Forgets requests that were carried out; any that arrived since stay. */
  remove (done: readonly HaltRequest[]): void {
    for (const request of done) this.requests.splice(this.requests.indexOf(request), 1)
  }
}
