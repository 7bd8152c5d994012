/**
 * The host's lease, assembled (docs/design.md §17): its watchdog opened and armed, the keeper that
 * pets it or fences the host, and the renewals from the API that feed the keeper its grants. An
 * agent with no watchdog keeps no lease, and has none of this.
 */
import type { Logger } from 'pino'
import type { AgentConfig } from '../../config/index.js'
import type { AgentMetrics } from '../metrics.js'
import { LeaseKeeper } from './lease-keeper.js'
import { readSavedLease, saveLease } from './lease-file.js'
import { LeaseRenewal } from './lease-renewal.js'
import { askPeer } from './peers.js'
import { openWatchdog } from './watchdog.js'

/** How often the lease keeper pets the watchdog or asks its peers: well inside any watchdog's timeout. */
const LEASE_DECISION_MS = 1_000
/** How often the lease is renewed: six times a default term (12 s), so that a few lost renewals cost nothing. */
const LEASE_RENEW_MS = 2_000
/** How long a started agent waits for its first grant before it fences (lease-keeper.ts). */
const LEASE_STARTUP_GRACE_MS = 10_000

export interface HostLease {
  keeper: LeaseKeeper
  start: () => void
  stop: () => void
}

export interface HostLeaseDependencies {
  /** Kills every VMM of the host (the supervisor's fence). */
  fenceAll: (reason: string) => Promise<void>
  metrics: AgentMetrics
  log: Logger
}

/**
 * The host's lease, its watchdog armed at once: from here the host is fenced unless the lease is
 * kept, so this comes before any VMM is adopted. Null without a watchdog.
 */
export async function prepareHostLease (config: AgentConfig, { fenceAll, metrics, log }: HostLeaseDependencies): Promise<HostLease | null> {
  if (config.watchdog === null) return null
  const watchdog = openWatchdog(config.watchdog.target, log)
  watchdog.arm()
  const keeper = new LeaseKeeper(
    { petEveryMs: LEASE_DECISION_MS, startupGraceMs: LEASE_STARTUP_GRACE_MS },
    {
      pet: () => { watchdog.pet() },
      askPeer: async (peer, timeoutMs) => await askPeer(peer, timeoutMs, config.token),
      fence: async (reason) => {
        metrics.hostFenced()
        await fenceAll(reason)
      },
      save: (kept) => { saveLease(config.stateDir, kept, log) },
      lapsed: () => {
        log.warn('host lease lapsed')
        metrics.leaseLapsed()
      }
    },
    log,
    await readSavedLease(config.stateDir, log)
  )
  const renewal = new LeaseRenewal(
    { apiUrl: config.apiUrl!, hostId: config.hostId, token: config.token, watchdogMs: config.watchdog.timeoutMs, renewEveryMs: LEASE_RENEW_MS },
    keeper,
    log
  )
  return {
    keeper,
    start: () => {
      keeper.start()
      renewal.start()
    },
    stop: () => {
      renewal.stop()
      keeper.stop()
    }
  }
}
