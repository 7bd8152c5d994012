/**
 * The host agent, assembled: state directory, VMM supervisor, report outbox, heartbeat and HTTP
 * API. `startAgent` brings them up in the order that keeps the invariants: the state directory
 * is claimed before any VMM is touched, every VMM is adopted or accounted for before the API
 * takes requests, and Temporal is never waited for.
 *
 * `close` stops the agent and leaves every VMM process running: a restarted agent adopts them.
 */
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { AgentConfig } from '../config/index.js'
import { buildAgentApp } from './http/app.js'
import { ImageResolver } from './images.js'
import { AgentMetrics } from './metrics.js'
import { prepareHostLease, type HostLease } from './lease/host-lease.js'
import { Heartbeat } from './reports/heartbeat.js'
import { ReportOutbox } from './reports/outbox.js'
import { TemporalGateway } from './reports/temporal.js'
import { vmmCommandPrefix } from './cloud-hypervisor/launch.js'
import { HostFirewall, hostPlan, type LiveVmm } from './network/host-firewall.js'
import { NetworkSegments } from './network/segments.js'
import { TapDevices } from './network/taps.js'
import { missingHostTools, withSbin } from './host-tools.js'
import { StartupError, claimStateDir, findExecutable } from './state-dir.js'
import { InstanceStorage } from './storage/instance-storage.js'
import { RecordStore } from './store/record-store.js'
import { MigrationTransport } from './supervisor/migration-transport.js'
import { Supervisor } from './supervisor/supervisor.js'
import { VmmDevices } from './supervisor/vmm-devices.js'

/** How often a VMM adopted from an earlier agent is checked in /proc. */
const ADOPTED_PROCESS_POLL_MS = 1000
/** How long a new VMM's API may take to come up (Kata waits 10 s too). */
const API_READY_TIMEOUT_MS = 10_000
/** How long a kill waits for the process to exit before the caller is asked to retry. */
const KILL_WAIT_MS = 10_000

export interface RunningAgent {
  app: FastifyInstance
  supervisor: Supervisor
  outbox: ReportOutbox
  close: () => Promise<void>
}

export async function startAgent (config: AgentConfig, log: Logger): Promise<RunningAgent> {
  process.env.PATH = withSbin(process.env.PATH ?? '')
  const missing = await missingHostTools(process.env.PATH)
  if (missing.length > 0) {
    throw new StartupError(`missing ${missing.map((tool) => `${tool.command} (Debian package ${tool.debianPackage})`).join(', ')}; install them`)
  }
  const releaseStateDir = await claimStateDir(config.stateDir)
  const cloudHypervisor = await findExecutable(config.cloudHypervisor)
  log.info({ cloudHypervisor, stateDir: config.stateDir, imageDir: config.imageDir, storageDir: config.storageDir, netns: config.netns, migrationListen: config.migrationListen }, 'host agent starting')
  const images = new ImageResolver(config.imageDir)
  const storage = new InstanceStorage(config.storageDir, config.hostId, images)
  await storage.init()
  // Made before the supervisor is, whose live VMMs (their interfaces, their policies) they read.
  let liveVmms = (): LiveVmm[] => []
  const segments = new NetworkSegments(config.netns, config.underlay, () => liveVmms().flatMap((vmm) => vmm.policy?.routes ?? []))
  await segments.prepareUnderlay().catch((err: Error) => { throw new StartupError(err.message) })
  const firewall = new HostFirewall(config.netns, async () => hostPlan((await segments.list()).map((segment) => segment.vni), liveVmms()))
  await firewall.enableForwarding()
  const transport = new MigrationTransport(config.migrationListen)
  await transport.init()

  const temporal = new TemporalGateway(config.temporal)
  const metrics = new AgentMetrics(config.hostId)
  // Made once the supervisor is, which it fences; the supervisor asks it before every new VMM.
  let lease: HostLease | null = null
  const outbox = new ReportOutbox(
    { hostId: config.hostId, retryMaxMs: config.reportRetryMaxMs },
    async (report) => {
      await temporal.sendReport(report)
      metrics.reportAccepted(report.observedAt)
    },
    log
  )
  const supervisor = new Supervisor({
    settings: {
      hostId: config.hostId,
      cloudHypervisor,
      vmmCallTimeoutMs: config.vmmCallTimeoutMs,
      vmmPingIntervalMs: config.vmmPingIntervalMs,
      powerButtonIntervalMs: config.powerButtonIntervalMs,
      processPollMs: ADOPTED_PROCESS_POLL_MS,
      apiReadyTimeoutMs: API_READY_TIMEOUT_MS,
      killWaitMs: KILL_WAIT_MS,
      commandPrefix: vmmCommandPrefix(config.netns, process.getuid?.() === 0),
      serialLogBytes: config.serialLogBytes
    },
    store: new RecordStore(config.stateDir),
    devices: new VmmDevices(images, storage, new TapDevices(config.netns), segments, firewall),
    transport,
    log,
    onChange: (vmm) => { outbox.notify(vmm) },
    onKill: (cause) => { metrics.vmmKilled(cause) },
    onMigrationEnded: (role, outcome) => { metrics.migrationEnded(role, outcome) },
    refusesNewVmms: () => lease === null || lease.keeper.mayStartVmms() ? null : 'this host holds no lease from the control plane: it takes no new VMM until it does'
  })
  liveVmms = () => supervisor.all().filter((vmm) => !vmm.terminal).map((vmm) => vmm.record)
  lease = await prepareHostLease(config, { fenceAll: async (reason) => { await supervisor.fenceAll(reason) }, metrics, log })
  metrics.readFrom({
    vmmStates: () => supervisor.all().map((vmm) => vmm.record.state),
    outboxDepth: () => outbox.pending,
    leaseHeld: () => lease?.keeper.holds() ?? null
  })
  await supervisor.start()
  // Segments a crash left with no TAP on them (made for a VMM that never got its TAP, or whose last TAP went before the agent did).
  const pruned = await segments.prune()
  if (pruned.length > 0) log.info({ vnis: pruned }, 'removed network segments no TAP is on')
  await firewall.rebuild({ force: true })
  lease?.start()
  // Live VMMs, and any report not yet accepted: what Temporal accepted is durable there.
  outbox.resendAll(supervisor.all().filter((vmm) => !vmm.terminal || vmm.record.generation > vmm.record.reportedGeneration))

  const startedAt = new Date().toISOString()
  const app = await buildAgentApp({ token: config.token, faultsFrom: config.faultInjection ? config.stateDir : null }, log, {
    supervisor,
    metrics: metrics.registry,
    health: { status: 'ok', hostId: config.hostId, startedAt },
    hostId: config.hostId,
    lease: lease?.keeper ?? null
  })
  await app.listen({ host: config.listenHost, port: config.listenPort })

  const heartbeat = new Heartbeat(
    async () => ({
      hostId: config.hostId,
      agentUrl: config.url,
      capacity: config.capacity,
      agentStartedAt: startedAt,
      storageGiB: config.storageGiB ?? await storage.capacityGiB(),
      images: await images.catalog(),
      ...(config.watchdog === null ? {} : { lease: { watchdogMs: config.watchdog.timeoutMs } })
    }),
    config.heartbeatMs,
    async (announcement) => { await temporal.sendHeartbeat(announcement) },
    log
  )
  heartbeat.start()

  return {
    app,
    supervisor,
    outbox,
    async close () {
      heartbeat.stop()
      lease?.stop()
      await app.close()
      outbox.stop()
      supervisor.release()
      await temporal.close()
      await releaseStateDir()
    }
  }
}
