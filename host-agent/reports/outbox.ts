/**
 * The durable report outbox (I5).
 *
 * Theory of operation
 *
 * The outbox has no storage of its own: the records are the outbox. A VMM needs a report while
 * its `generation` (bumped and persisted with every change) is ahead of its
 * `reportedGeneration` (persisted once Temporal accepted a report of that generation). Whatever
 * happens to the agent, the gap survives on disk, and a restarted agent simply sends the current
 * state of every live VMM again, and every report not yet accepted (the control plane drops
 * reports whose generation it has already seen).
 *
 * A report always carries the VMM's state at the moment it is sent, not the change that caused
 * it, so a burst of changes collapses into one report. One report per VMM is in flight at a
 * time, and up to CONCURRENCY of them at once, each slot taking the next due VMM as soon as its
 * report is accepted; a change that arrives meanwhile sends another once the first is accepted.
 *
 * When Temporal refuses or cannot be reached, the outbox backs off exponentially (with jitter,
 * up to `retryMaxMs`) and tries again, forever. Nothing else waits for it: the HTTP API and the
 * kill path never touch the outbox except to notify it.
 */
import type { Logger } from 'pino'
import type { VmmReport } from '../../domain/vmm.js'
import { toReport } from '../store/record.js'
import type { VmmSupervisor } from '../supervisor/vmm-supervisor.js'

const CONCURRENCY = 16
const FIRST_RETRY_MS = 250

export interface OutboxSettings {
  hostId: string
  retryMaxMs: number
}

export class ReportOutbox {
  readonly #due = new Map<string, VmmSupervisor>()
  /** VMMs whose current state is sent even if already reported (agent start). */
  readonly #forced = new Set<string>()
  readonly #inFlight = new Set<string>()
  #slots = 0
  /** Set by a slot whose delivery failed: the others stop taking work, then all wait a while. */
  #failure: Error | null = null
  #retryTimer: NodeJS.Timeout | null = null
  #failures = 0
  #stopped = false

  constructor (
    private readonly settings: OutboxSettings,
    private readonly send: (report: VmmReport) => Promise<void>,
    private readonly log: Logger
  ) {}

  /** How many VMMs wait for a report to be accepted. */
  get pending (): number {
    return this.#due.size
  }

  notify (vmm: VmmSupervisor): void {
    this.#due.set(vmm.id, vmm)
    this.#kick()
  }

  /** Sends the current state of every VMM again, reported or not. */
  resendAll (vmms: Iterable<VmmSupervisor>): void {
    for (const vmm of vmms) {
      this.#forced.add(vmm.id)
      this.#due.set(vmm.id, vmm)
    }
    this.#kick()
  }

  stop (): void {
    this.#stopped = true
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
    this.#retryTimer = null
  }

  /** Opens slots, up to CONCURRENCY, while some due VMM has no report in flight. */
  #kick (): void {
    while (this.#slots < CONCURRENCY && this.#retryTimer === null && this.#failure === null && !this.#stopped && this.#nextDue() !== undefined) {
      this.#slots++
      this.#slot()
        .catch((err: Error) => { this.log.error({ err: err.message }, 'report outbox failed') })
        .finally(() => {
          this.#slots--
          if (this.#slots === 0) this.#afterLastSlot()
        })
    }
  }

  #nextDue (): VmmSupervisor | undefined {
    for (const vmm of this.#due.values()) if (!this.#inFlight.has(vmm.id)) return vmm
    return undefined
  }

  /** Delivers one due VMM's report after another until none is left for it to take. */
  async #slot (): Promise<void> {
    for (let vmm = this.#nextDue(); vmm !== undefined && this.#failure === null && !this.#stopped; vmm = this.#nextDue()) {
      this.#inFlight.add(vmm.id)
      try {
        await this.#deliver(vmm)
      } catch (err) {
        this.#failure = err as Error
      } finally {
        this.#inFlight.delete(vmm.id)
      }
    }
  }

  #afterLastSlot (): void {
    const failure = this.#failure
    this.#failure = null
    if (failure !== null) {
      this.#scheduleRetry(failure)
      return
    }
    this.#failures = 0
    // A notification that came while the last slot finished must not wait for the next one.
    this.#kick()
  }

  async #deliver (vmm: VmmSupervisor): Promise<void> {
    // What is saved, never a change still being saved (vmm-supervisor.ts).
    const record = vmm.durable
    const generation = record.generation
    if (generation <= record.reportedGeneration && !this.#forced.has(vmm.id)) {
      this.#due.delete(vmm.id)
      return
    }
    await this.send(toReport(record, this.settings.hostId))
    this.#forced.delete(vmm.id)
    await vmm.markReported(generation)
    vmm.log.debug({ generation, state: record.state }, 'report accepted by Temporal')
    if (vmm.durable.generation === generation) this.#due.delete(vmm.id)
  }

  #scheduleRetry (err: Error): void {
    this.#failures++
    const base = Math.min(this.settings.retryMaxMs, FIRST_RETRY_MS * 2 ** (this.#failures - 1))
    const delay = Math.round(base * (0.8 + Math.random() * 0.4))
    this.log.warn({ err: err.message, pending: this.#due.size, attempt: this.#failures, retryInMs: delay },
      'Temporal did not accept VMM reports; retrying')
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null
      this.#kick()
    }, delay)
    this.#retryTimer.unref()
  }
}
