/**
 * The agent's renewals of its host's lease, straight from the control plane's API (`PUT
 * /v1/hosts/:id/lease`, docs/design.md §17): every `renewEveryMs`, one request, which acknowledges
 * the last grant this agent took and is answered with the next. The term of that grant runs from
 * the request's send, on the host's monotonic clock, and the keeper refuses a grant that came too
 * late (host-agent/lease/lease-keeper.ts); so a request is given up after `grantMaxAgeMs` too,
 * since its answer could only be refused. A renewal that fails is logged once per failing spell;
 * the next one tries again, and one in flight is never doubled up.
 */
import type { Logger } from 'pino'
import { leaseGrantSchema, type LeaseGrant } from '../../domain/host-lease-api.js'
import { DEFAULT_LEASE_SETTINGS } from '../../domain/host-lease.js'
import type { LeaseKeeper } from './lease-keeper.js'

export interface LeaseRenewalSettings {
  apiUrl: string
  hostId: string
  token: string
  watchdogMs: number
  renewEveryMs: number
}

export class LeaseRenewal {
  #timer: NodeJS.Timeout | null = null
  #inFlight = false
  #failing = false
  /** The last grant this agent took (its `grantedAt`), acknowledged by the next renewal. */
  #took: number | null = null
  /** How late a grant may come: the last grant's word, the default lease's until one says. */
  #grantMaxAgeMs = DEFAULT_LEASE_SETTINGS.grantMaxAgeMs

  constructor (
    private readonly settings: LeaseRenewalSettings,
    private readonly keeper: LeaseKeeper,
    private readonly log: Logger
  ) {}

  start (): void {
    this.#renewInBackground()
    this.#timer = setInterval(() => { this.#renewInBackground() }, this.settings.renewEveryMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** One renewal, whose grant the keeper takes or refuses. */
  async #renew (): Promise<void> {
    if (this.#inFlight) return
    this.#inFlight = true
    const sentAt = this.keeper.clock()
    try {
      const grant = await this.#ask()
      this.#grantMaxAgeMs = grant.grantMaxAgeMs
      if (this.keeper.take(grant, sentAt)) this.#took = grant.grantedAt
      if (this.#failing) this.log.info('lease renewed again')
      this.#failing = false
    } catch (err) {
      // Say it once per failing spell, not once per renewal.
      if (!this.#failing) this.log.warn({ err: (err as Error).message }, "lease not renewed: the control plane's API did not answer in time; retrying every renewal")
      this.#failing = true
    } finally {
      this.#inFlight = false
    }
  }

  /** A renewal nobody awaits: it never rejects, since it logs its failure and takes nothing. */
  #renewInBackground (): void {
    // eslint-disable-next-line no-void
    void this.#renew()
  }

  async #ask (): Promise<LeaseGrant> {
    const { apiUrl, hostId, token, watchdogMs } = this.settings
    const response = await fetch(new URL(`/v1/hosts/${encodeURIComponent(hostId)}/lease`, apiUrl), {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ watchdogMs, took: this.#took }),
      signal: AbortSignal.timeout(this.#grantMaxAgeMs)
    })
    const body = await response.text()
    if (response.status !== 200) throw new Error(`PUT /v1/hosts/${hostId}/lease answered ${response.status}: ${body.slice(0, 300)}`)
    return leaseGrantSchema.parse(JSON.parse(body))
  }
}
