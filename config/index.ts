/**
 * Every setting of every vmplane process, read from the environment and validated once at
 * start-up. A bad value stops the process with one line naming the variable and the problem.
 *
 * Each process reads only its own section: `apiConfig`, `workerConfig`, `agentConfig`. The dev
 * stack, which is no part of a deployment, reads its own settings with the same pieces
 * (stack/config.ts). The README's settings table lists the same variables.
 */
import { cpus, totalmem } from 'node:os'
import { join, resolve } from 'node:path'
import { z } from 'zod'
import { DEFAULT_LEASE_SETTINGS } from '../domain/host-lease.js'
import { DEFAULT_STOP_GRACE_SECONDS, HISTORY_LIMITS } from '../domain/limits.js'

export type Env = Record<string, string | undefined>

export const port = z.coerce.number().int().min(1).max(65535)
const seconds = z.coerce.number().positive()
const count = z.coerce.number().int().positive()
const token = z.string().min(16, 'must be at least 16 characters')
/** A token that may be left out; empty counts as left out (Compose's `${VAR:-}`). */
export const optionalToken = z.preprocess((value) => value === '' ? undefined : value, token.optional())
const flag = z.enum(['0', '1', 'true', 'false']).transform((v) => v === '1' || v === 'true')
export const DEFAULT_TEMPORAL_PORT = 7233
/** Prometheus' conventional exporter port. */
export const DEFAULT_WORKER_METRICS_PORT = 9464

const temporalSchema = z.object({
  VMPLANE_TEMPORAL_ADDRESS: z.string().optional(),
  VMPLANE_TEMPORAL_PORT: port.default(DEFAULT_TEMPORAL_PORT),
  VMPLANE_TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  VMPLANE_TASK_QUEUE: z.string().min(1).default('vmplane')
})

const logSchema = z.object({
  VMPLANE_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  /** Human-readable logs (the dev stack turns this on); JSON lines otherwise. */
  VMPLANE_LOG_PRETTY: flag.default(false)
})

/**
 * Where a live migration's target listens (`VMPLANE_MIGRATION_LISTEN`): `unix:<directory>` for
 * hosts that share one machine's filesystem (tests, the dev stack), a socket per migration in it;
 * `tcp:<address>:<first>-<last>` for real hosts, the address the other hosts reach this one at and
 * a range of ports kept for migrations.
 */
export type MigrationListen =
  | { kind: 'unix', dir: string }
  | { kind: 'tcp', address: string, firstPort: number, lastPort: number }

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/
const MIGRATION_LISTEN_RULE = 'must be unix:<absolute directory> or tcp:<IPv4 address or [IPv6 address]>:<first port>-<last port>'

const migrationListen = z.string().transform((value, ctx): MigrationListen => {
  const unix = /^unix:(\/[^\0]*)$/.exec(value)
  if (unix !== null) return { kind: 'unix', dir: resolve(unix[1]!) }
  const tcp = /^tcp:(.+):(\d{1,5})-(\d{1,5})$/.exec(value)
  const address = tcp?.[1] ?? ''
  const validAddress = IPV4.test(address) || (/^\[.+\]$/.test(address) && z.ipv6().safeParse(address.slice(1, -1)).success)
  const [firstPort, lastPort] = [Number(tcp?.[2]), Number(tcp?.[3])]
  if (tcp === null || !validAddress || firstPort < 1 || lastPort > 65535 || firstPort > lastPort) {
    ctx.addIssue({ code: 'custom', message: MIGRATION_LISTEN_RULE })
    return z.NEVER
  }
  return { kind: 'tcp', address, firstPort, lastPort }
})

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** The settings `schema` reads from `env`, or a ConfigError naming every variable that is wrong. */
export function parseEnv<S extends z.ZodType> (schema: S, env: Env): z.infer<S> {
  const result = schema.safeParse(env)
  if (result.success) return result.data
  const problems = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)
  throw new ConfigError(`invalid configuration: ${problems.join('; ')}`)
}

export interface TemporalConfig {
  address: string
  namespace: string
  taskQueue: string
}

export interface LogConfig {
  level: string
  pretty: boolean
}

export function temporalConfig (env: Env): TemporalConfig {
  const t = parseEnv(temporalSchema, env)
  return {
    address: t.VMPLANE_TEMPORAL_ADDRESS ?? `127.0.0.1:${t.VMPLANE_TEMPORAL_PORT}`,
    namespace: t.VMPLANE_TEMPORAL_NAMESPACE,
    taskQueue: t.VMPLANE_TASK_QUEUE
  }
}

function logConfig (env: Env): LogConfig {
  const l = parseEnv(logSchema, env)
  return { level: l.VMPLANE_LOG_LEVEL, pretty: l.VMPLANE_LOG_PRETTY }
}

export const databaseUrl = z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')

/** Read by the worker (which marks silent hosts) and the API (which shows failing contact). */
const hostUnreachableSeconds = seconds.default(60)

/** Read by the API (which grants hosts' leases and shows them) and the worker (which judges them). */
const leaseSeconds = z.coerce.number()
  .min(DEFAULT_LEASE_SETTINGS.grantMaxAgeMs * 3 / 1000, `must be at least ${DEFAULT_LEASE_SETTINGS.grantMaxAgeMs * 3 / 1000} (three times the oldest renewal whose grant an agent takes)`)
  .default(DEFAULT_LEASE_SETTINGS.termMs / 1000)
const watchdogSeconds = seconds.default(DEFAULT_LEASE_SETTINGS.watchdogMs / 1000)

function leaseSettings (termSeconds: number, watchdogSeconds: number) {
  return { ...DEFAULT_LEASE_SETTINGS, termMs: termSeconds * 1000, watchdogMs: watchdogSeconds * 1000 }
}

export function apiConfig (env: Env = process.env) {
  const a = parseEnv(
    z.object({
      VMPLANE_API_HOST: z.string().default('127.0.0.1'),
      VMPLANE_API_PORT: port.default(8080),
      VMPLANE_API_TOKEN: token,
      VMPLANE_API_VIEWER_TOKEN: optionalToken,
      VMPLANE_API_RATE_LIMIT: count.default(6000),
      DATABASE_URL: databaseUrl,
      VMPLANE_DEFAULT_STOP_GRACE_SECONDS: z.coerce.number().int().min(0).max(3600).default(DEFAULT_STOP_GRACE_SECONDS),
      VMPLANE_HOST_UNREACHABLE_SECONDS: hostUnreachableSeconds,
      VMPLANE_HOST_LEASE_SECONDS: leaseSeconds,
      VMPLANE_HOST_WATCHDOG_SECONDS: watchdogSeconds,
      VMPLANE_AGENT_TOKEN: optionalToken
    }),
    env
  )
  return {
    host: a.VMPLANE_API_HOST,
    port: a.VMPLANE_API_PORT,
    tokens: { operator: a.VMPLANE_API_TOKEN, viewer: a.VMPLANE_API_VIEWER_TOKEN ?? null },
    /** Requests per minute each token may make. */
    rateLimitPerMinute: a.VMPLANE_API_RATE_LIMIT,
    databaseUrl: a.DATABASE_URL,
    defaultStopGraceSeconds: a.VMPLANE_DEFAULT_STOP_GRACE_SECONDS,
    hostUnreachableAfterMs: a.VMPLANE_HOST_UNREACHABLE_SECONDS * 1000,
    /** Hosts' leases, as this API grants them on renewal and shows them on `GET /v1/hosts`. */
    lease: leaseSettings(a.VMPLANE_HOST_LEASE_SECONDS, a.VMPLANE_HOST_WATCHDOG_SECONDS),
    /** The host agents' token, for the console relay; without it the console routes answer 503. */
    agentToken: a.VMPLANE_AGENT_TOKEN ?? null,
    temporal: temporalConfig(env),
    log: logConfig(env)
  }
}
export type ApiConfig = ReturnType<typeof apiConfig>

export function workerConfig (env: Env = process.env) {
  const w = parseEnv(
    z.object({
      DATABASE_URL: databaseUrl,
      VMPLANE_AGENT_TOKEN: token,
      VMPLANE_BOOT_TIMEOUT_SECONDS: seconds.default(60),
      VMPLANE_PLACEMENT_TIMEOUT_SECONDS: seconds.default(300),
      VMPLANE_KILL_BACKSTOP_SECONDS: seconds.default(2),
      VMPLANE_AGENT_CALL_TIMEOUT_SECONDS: seconds.default(12),
      VMPLANE_HOST_UNREACHABLE_SECONDS: hostUnreachableSeconds,
      VMPLANE_HOST_LEASE_SECONDS: leaseSeconds,
      VMPLANE_HOST_WATCHDOG_SECONDS: watchdogSeconds,
      VMPLANE_RESTART_BACKOFF_SECONDS: seconds.default(10),
      VMPLANE_RESTART_BACKOFF_MAX_SECONDS: seconds.default(300),
      VMPLANE_RESTART_RESET_SECONDS: seconds.default(600),
      VMPLANE_RECONCILE_SECONDS: seconds.default(30),
      VMPLANE_ORPHAN_GRACE_SECONDS: seconds.default(120),
      VMPLANE_MIGRATION_PROGRESS_TIMEOUT_SECONDS: seconds.default(150),
      VMPLANE_MIGRATION_SECONDS_PER_GIB: seconds.default(800),
      VMPLANE_MIGRATION_DOWNTIME_MS: z.coerce.number().int().min(1).max(60_000).default(300),
      VMPLANE_WORKER_METRICS_HOST: z.string().default('127.0.0.1'),
      VMPLANE_WORKER_METRICS_PORT: port.default(DEFAULT_WORKER_METRICS_PORT)
    }),
    env
  )
  return {
    databaseUrl: w.DATABASE_URL,
    agentToken: w.VMPLANE_AGENT_TOKEN,
    /** How long a new VMM may take to report `running` before it is killed. */
    bootTimeoutMs: w.VMPLANE_BOOT_TIMEOUT_SECONDS * 1000,
    /** How long a start waits for a host with room (`NoCapacity`) before it fails. */
    placementTimeoutMs: w.VMPLANE_PLACEMENT_TIMEOUT_SECONDS * 1000,
    /**
     * How long after a stop's deadline the workflow kills the VMM itself. The agent kills at
     * the deadline; this is the backstop for an agent that did not.
     */
    killBackstopMs: w.VMPLANE_KILL_BACKSTOP_SECONDS * 1000,
    agentCallTimeoutMs: w.VMPLANE_AGENT_CALL_TIMEOUT_SECONDS * 1000,
    /** How long a host's agent may be silent before the host is shown unreachable. */
    hostUnreachableAfterMs: w.VMPLANE_HOST_UNREACHABLE_SECONDS * 1000,
    /** Auto-restart backoff: the first delay, doubling up to the maximum; reset after this long running. */
    restartBackoffMs: w.VMPLANE_RESTART_BACKOFF_SECONDS * 1000,
    restartBackoffMaxMs: w.VMPLANE_RESTART_BACKOFF_MAX_SECONDS * 1000,
    restartResetMs: w.VMPLANE_RESTART_RESET_SECONDS * 1000,
    /** How often the reconciler's schedule runs a pass. */
    reconcileEveryMs: w.VMPLANE_RECONCILE_SECONDS * 1000,
    /** How old an orphan VMM or a stray process must be before the reconciler reaps it. */
    orphanGraceMs: w.VMPLANE_ORPHAN_GRACE_SECONDS * 1000,
    /**
     * When a live migration gives up (KubeVirt's progressTimeout and completionTimeoutPerGiB,
     * with its defaults), and the pause Cloud Hypervisor aims for at its end.
     */
    migration: {
      progressTimeoutMs: w.VMPLANE_MIGRATION_PROGRESS_TIMEOUT_SECONDS * 1000,
      completionMsPerGiB: w.VMPLANE_MIGRATION_SECONDS_PER_GIB * 1000,
      downtimeMs: w.VMPLANE_MIGRATION_DOWNTIME_MS
    },
    /** When a halt continues as new (domain/limits.ts). */
    history: { ...HISTORY_LIMITS },
    /**
     * Hosts' leases (docs/design.md §17): their term, and the longest watchdog timeout a host may
     * announce and still be declared lost by its lease.
     */
    lease: leaseSettings(w.VMPLANE_HOST_LEASE_SECONDS, w.VMPLANE_HOST_WATCHDOG_SECONDS),
    /** Where the worker serves Prometheus metrics (Temporal's runtime exporter). */
    metricsAddress: `${w.VMPLANE_WORKER_METRICS_HOST}:${w.VMPLANE_WORKER_METRICS_PORT}`,
    temporal: temporalConfig(env),
    log: logConfig(env)
  }
}
export type WorkerConfig = ReturnType<typeof workerConfig>

export function agentConfig (env: Env = process.env) {
  const a = parseEnv(
    z.object({
      VMPLANE_HOST_ID: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be a lower-case name like host-1'),
      VMPLANE_AGENT_HOST: z.string().default('127.0.0.1'),
      VMPLANE_AGENT_PORT: port.default(7301),
      VMPLANE_AGENT_URL: z.url().optional(),
      VMPLANE_AGENT_TOKEN: token,
      VMPLANE_AGENT_STATE_DIR: z.string().min(1),
      VMPLANE_IMAGE_DIR: z.string().min(1),
      VMPLANE_STORAGE_DIR: z.string().min(1),
      VMPLANE_STORAGE_GIB: count.optional(),
      VMPLANE_AGENT_NETNS: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be a network namespace name').optional(),
      VMPLANE_AGENT_UNDERLAY: z.string().regex(/^[A-Za-z0-9_.-]{1,15}$/, 'must be an interface name of at most 15 characters').default('eth0'),
      VMPLANE_MIGRATION_LISTEN: migrationListen.optional(),
      VMPLANE_AGENT_WATCHDOG: z.string().regex(/^(unix:)?\/[^\0]*$/, 'must be a device path (/dev/watchdog) or unix:<socket path>').optional(),
      VMPLANE_HOST_WATCHDOG_SECONDS: watchdogSeconds,
      VMPLANE_API_URL: z.url().optional(),
      VMPLANE_SERIAL_LOG_KIB: count.default(1024),
      VMPLANE_CLOUD_HYPERVISOR: z.string().min(1).default('cloud-hypervisor'),
      VMPLANE_HOST_VCPUS: count.default(cpus().length * 8),
      VMPLANE_HOST_MEMORY_MIB: count.default(Math.floor(totalmem() / 1024 / 1024)),
      VMPLANE_HEARTBEAT_SECONDS: seconds.default(5),
      VMPLANE_POWER_BUTTON_INTERVAL_SECONDS: seconds.default(5),
      VMPLANE_VMM_CALL_TIMEOUT_SECONDS: seconds.default(5),
      VMPLANE_VMM_PING_SECONDS: seconds.default(10),
      VMPLANE_REPORT_RETRY_MAX_SECONDS: seconds.default(30),
      VMPLANE_FAULT_INJECTION: flag.default(false)
    }).refine((v) => v.VMPLANE_AGENT_WATCHDOG === undefined || v.VMPLANE_API_URL !== undefined, {
      path: ['VMPLANE_API_URL'],
      message: "is required with VMPLANE_AGENT_WATCHDOG: the host renews its lease from the control plane's API"
    }),
    env
  )
  return {
    hostId: a.VMPLANE_HOST_ID,
    listenHost: a.VMPLANE_AGENT_HOST,
    listenPort: a.VMPLANE_AGENT_PORT,
    url: a.VMPLANE_AGENT_URL ?? `http://${a.VMPLANE_AGENT_HOST}:${a.VMPLANE_AGENT_PORT}`,
    token: a.VMPLANE_AGENT_TOKEN,
    stateDir: resolve(a.VMPLANE_AGENT_STATE_DIR),
    imageDir: resolve(a.VMPLANE_IMAGE_DIR),
    /**
     * Where instances' disks and seeds live: the same path on every host (shared storage), so an
     * instance may run, or migrate, anywhere (docs/design.md §14).
     */
    storageDir: resolve(a.VMPLANE_STORAGE_DIR),
    /** The storage's capacity this host announces; by default, the size of its filesystem. */
    storageGiB: a.VMPLANE_STORAGE_GIB ?? null,
    /** The host's network namespace, where TAPs are made and VMMs run; unset: the agent's own. */
    netns: a.VMPLANE_AGENT_NETNS ?? null,
    /** The device in that namespace on the hosts' LAN that carries the networks' VXLAN (network/segments.ts). */
    underlay: a.VMPLANE_AGENT_UNDERLAY,
    /** Where this host's migration targets listen; by default a directory in the shared storage. */
    migrationListen: a.VMPLANE_MIGRATION_LISTEN ?? { kind: 'unix', dir: join(resolve(a.VMPLANE_STORAGE_DIR), 'migrations') },
    /**
     * The host's watchdog, which the agent pets only while it holds its lease (docs/design.md
     * §17), and the timeout it was set to; without one the host keeps no lease and is never
     * declared lost by itself.
     */
    watchdog: a.VMPLANE_AGENT_WATCHDOG === undefined ? null : { target: a.VMPLANE_AGENT_WATCHDOG, timeoutMs: a.VMPLANE_HOST_WATCHDOG_SECONDS * 1000 },
    /** The control plane's API, from which a host with a watchdog renews its lease (PUT /v1/hosts/:id/lease). */
    apiUrl: a.VMPLANE_API_URL ?? null,
    serialLogBytes: a.VMPLANE_SERIAL_LOG_KIB * 1024,
    cloudHypervisor: a.VMPLANE_CLOUD_HYPERVISOR,
    capacity: { vcpus: a.VMPLANE_HOST_VCPUS, memoryMiB: a.VMPLANE_HOST_MEMORY_MIB },
    heartbeatMs: a.VMPLANE_HEARTBEAT_SECONDS * 1000,
    powerButtonIntervalMs: a.VMPLANE_POWER_BUTTON_INTERVAL_SECONDS * 1000,
    vmmCallTimeoutMs: a.VMPLANE_VMM_CALL_TIMEOUT_SECONDS * 1000,
    /** How often each VMM's API is pinged; no answer while the process lives marks it unresponsive. */
    vmmPingIntervalMs: a.VMPLANE_VMM_PING_SECONDS * 1000,
    /** The longest wait between two attempts to deliver VMM reports to Temporal. */
    reportRetryMaxMs: a.VMPLANE_REPORT_RETRY_MAX_SECONDS * 1000,
    /** Tests only: answer 503 or hang as `<stateDir>/fault` says (host-agent/http/fault-injection.ts). */
    faultInjection: a.VMPLANE_FAULT_INJECTION,
    temporal: temporalConfig(env),
    log: logConfig(env)
  }
}
export type AgentConfig = ReturnType<typeof agentConfig>

/** The dev stack's and the tests' host watchdog (host-agent/watchdog/), beside the host's agent. */
export function watchdogConfig (env: Env = process.env) {
  const w = parseEnv(
    z.object({
      VMPLANE_HOST_ID: z.string().min(1),
      VMPLANE_AGENT_STATE_DIR: z.string().min(1),
      VMPLANE_WATCHDOG_SOCKET: z.string().regex(/^\/[^\0]*$/, 'must be an absolute path'),
      VMPLANE_HOST_WATCHDOG_SECONDS: watchdogSeconds
    }),
    env
  )
  return {
    hostId: w.VMPLANE_HOST_ID,
    stateDir: resolve(w.VMPLANE_AGENT_STATE_DIR),
    socketPath: w.VMPLANE_WATCHDOG_SOCKET,
    timeoutMs: w.VMPLANE_HOST_WATCHDOG_SECONDS * 1000,
    log: logConfig(env)
  }
}

/** Reads a process's configuration, or stops the process with one line saying what is wrong. */
export function loadConfigOrExit<T> (read: () => T, processName: string): T {
  try {
    return read()
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`${processName}: ${err.message}`)
    process.exit(2)
  }
}
