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
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { MigrationRole } from '../domain/vmm.js'

export type KillCause = 'destroy' | 'stop-deadline' | 'boot-failed' | 'migration-failed' | 'migration-cancelled' | 'fenced' | 'stray'
export type MigrationOutcome = 'finished' | 'failed' | 'cancelled'

export interface MetricSources {
  vmmStates: () => Iterable<string>
  outboxDepth: () => number
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

  reportAccepted (changedAt: string): void {
    this.#reportLag.observe(Math.max(0, Date.now() - Date.parse(changedAt)) / 1000)
  }
}
