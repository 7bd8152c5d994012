/**
 * The agent's Prometheus metrics, served at `GET /metrics` (no token: it names no instance and
 * changes nothing). One registry per agent, so agents sharing a process (tests) keep their own.
 *
 * - `vmplane_agent_vmms{state}`: the VMMs this agent knows, by state, read at each scrape.
 * - `vmplane_agent_vmm_kills_total{cause}`: SIGKILLs sent to VMM processes: `destroy`,
 *   `stop-deadline`, `boot-failed`, `migration-failed` (a target whose receive failed),
 *   `migration-cancelled`, `fenced` (the host's lease lapsed), or `stray` (a process no record owns).
 * - `vmplane_agent_migrations_total{role, outcome}`: halves of live migrations this agent saw end,
 *   by role (`source`, `target`) and outcome (`finished`, `failed`, `cancelled`).
 * - `vmplane_agent_report_lag_seconds`: from a VMM's change to Temporal accepting its report.
 * - `vmplane_agent_outbox_depth`: VMMs whose latest change Temporal has not yet accepted.
 * - `vmplane_agent_lease_held`: 1 while the host holds its lease, 0 when not (absent on an agent
 *   that keeps none); `vmplane_agent_lease_lapses_total`: times it stopped holding it;
 *   `vmplane_agent_host_fences_total`: times the agent fenced its host (docs/design.md §17).
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { MigrationRole } from '../domain/vmm.js'

export type KillCause = 'destroy' | 'stop-deadline' | 'boot-failed' | 'migration-failed' | 'migration-cancelled' | 'fenced' | 'stray'
export type MigrationOutcome = 'finished' | 'failed' | 'cancelled'

export interface MetricSources {
  vmmStates: () => Iterable<string>
  outboxDepth: () => number
  /** Whether the host holds its lease; null for an agent that keeps none. */
  leaseHeld: () => boolean | null
}

export class AgentMetrics {
  readonly registry = new Registry()
  readonly #kills = new Counter({
    name: 'vmplane_agent_vmm_kills_total',
    help: 'SIGKILLs sent to VMM processes, by cause',
    labelNames: ['cause'] as const,
    registers: [this.registry]
  })

  readonly #migrations = new Counter({
    name: 'vmplane_agent_migrations_total',
    help: 'Halves of live migrations that ended on this host, by role and outcome',
    labelNames: ['role', 'outcome'] as const,
    registers: [this.registry]
  })

  readonly #reportLag = new Histogram({
    name: 'vmplane_agent_report_lag_seconds',
    help: "From a VMM's change to Temporal accepting its report",
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry]
  })

  readonly #vmms: Gauge<'state'> = new Gauge({
    name: 'vmplane_agent_vmms',
    help: 'VMMs this agent knows, by state',
    labelNames: ['state'] as const,
    registers: [this.registry],
    collect: () => {
      this.#vmms.reset()
      for (const state of this.#sources?.vmmStates() ?? []) this.#vmms.inc({ state })
    }
  })

  readonly #outboxDepth: Gauge = new Gauge({
    name: 'vmplane_agent_outbox_depth',
    help: 'VMMs whose latest change Temporal has not yet accepted',
    registers: [this.registry],
    collect: () => { this.#outboxDepth.set(this.#sources?.outboxDepth() ?? 0) }
  })

  readonly #leaseHeld: Gauge = new Gauge({
    name: 'vmplane_agent_lease_held',
    help: 'Whether the host holds its lease from the control plane (1) or not (0)',
    registers: [this.registry],
    collect: () => {
      const held = this.#sources?.leaseHeld() ?? null
      if (held === null) this.#leaseHeld.reset()
      else this.#leaseHeld.set(held ? 1 : 0)
    }
  })

  readonly #leaseLapses = new Counter({
    name: 'vmplane_agent_lease_lapses_total',
    help: 'Times the host stopped holding its lease',
    registers: [this.registry]
  })

  readonly #fences = new Counter({
    name: 'vmplane_agent_host_fences_total',
    help: 'Times the agent fenced its host: its lease lapsed and no majority of its peers vouched for an outage',
    registers: [this.registry]
  })

  #sources: MetricSources | null = null

  constructor (hostId: string) {
    this.registry.setDefaultLabels({ host: hostId })
    collectDefaultMetrics({ register: this.registry })
  }

  /** The supervisor and the outbox exist after the metrics they feed; scrapes read them once set. */
  readFrom (sources: MetricSources): void {
    this.#sources = sources
  }

  vmmKilled (cause: KillCause): void {
    this.#kills.inc({ cause })
  }

  migrationEnded (role: MigrationRole, outcome: MigrationOutcome): void {
    this.#migrations.inc({ role, outcome })
  }

  leaseLapsed (): void {
    this.#leaseLapses.inc()
  }

  hostFenced (): void {
    this.#fences.inc()
  }

  reportAccepted (changedAt: string): void {
    this.#reportLag.observe(Math.max(0, Date.now() - Date.parse(changedAt)) / 1000)
  }
}
