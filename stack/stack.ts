/**
 * The dev stack: every part of vmplane on one machine, started in dependency order, supervised,
 * and stopped in reverse order.
 *
 * Replicas (`VMPLANE_API_REPLICAS`, `VMPLANE_WORKER_REPLICAS`): the worker and the API below are
 * each as many processes (`worker`, `worker-2`, …; `api`, `api-2`, …), and with more than one API,
 * HAProxy (api-balancer.ts) stands in front of them on the API's port, stopped with the clients.
 * Readiness then waits for every API.
 *
 * Start: take the data directory (pid-files.ts) → secrets → the `temporal` and `tctl` tools →
 * PostgreSQL and Temporal side by side → the `vmplane` database and its migrations → the worker,
 * the stack's LAN (stack-lan.ts; what stacks that are gone left of theirs is removed then,
 * leftover-networks.ts), the host agents (each inside its host's network namespace on that LAN,
 * host-network.ts) and the API → wait until the stack is ready (readiness.ts: the agents, the API
 * with the worker behind it, every host active with its images announced) → the `default`
 * network (default-network.ts) → write run/stack.json and print where everything is. In the cluster
 * shape (`VMPLANE_TEMPORAL=cluster`) Temporal needs PostgreSQL: PostgreSQL → Temporal's databases
 * and schemas (temporal-schemas.ts) → the server (temporal-cluster.ts) and its Web UI
 * (temporal-ui.ts) → its namespace and search attributes (temporal-namespace.ts), beside
 * vmplane's own migrations.
 *
 * Stop: the clients first (API, worker, agents with their hosts' watchdogs, the cluster shape's
 * Temporal UI), then Temporal, then PostgreSQL; each gets SIGTERM (PostgreSQL SIGINT) and is
 * killed if it has not exited 10 s later. VMM processes are left running, with the hosts'
 * networks and their LAN, like VMs on a real host whose control plane restarts: the next start's
 * agents re-adopt them.
 */
import { mkdir } from 'node:fs/promises'
import { dirname, isAbsolute, relative } from 'node:path'
import type { StackConfig } from './config.js'
import { migrate } from '../db/migrate.js'
import { ensureTemporalServer, ensureTemporalTools } from '../scripts/tools/temporal-tools.js'
import {
  agentSpec, apiSpec, watchdogSpec, apiUrl, checkEntryPoints, planApiReplicas, planHosts, planWorkerReplicas, workerSpec,
  type ComponentContext, type HostPlan, type Replica
} from './components.js'
import { BALANCER_COMPONENT, balancerSpec } from './api-balancer.js'
import { ensureHaproxy } from '../scripts/tools/haproxy.js'
import { stackPaths, type StackPaths } from './data-dir.js'
import { DEFAULT_NETWORK } from '../domain/interfaces.js'
import { DEFAULT_NETWORK_CIDR, ensureDefaultNetwork } from './default-network.js'
import { ensureHostNetwork } from './host-network.js'
import { STAND_IN_BASE_IMAGE, chooseHypervisor, writeStandInImages } from './hypervisor.js'
import { StackOutput } from './output.js'
import { DATA_DIR_MARK, claimDataDir, releaseDataDir } from './pid-files.js'
import { ensureDatabase, preparePostgres, waitForPostgres, type PostgresServer } from './postgres.js'
import { findVmmProcesses } from './processes.js'
import { removeLeftoverNetworks } from './leftover-networks.js'
import { loadOrCreateSecret } from './secrets.js'
import { removeStackFile, writeStackFile, type StackInfo } from './stack-file.js'
import { attachHost, ensureStackLan, removeStackNetwork } from './stack-lan.js'
import { Supervisor, type ComponentSpec } from './supervisor.js'
import { temporalAddress, temporalSpec, temporalUiUrl, waitForTemporal } from './temporal.js'
import { HISTORY_SHARDS, prepareClusterServer } from './temporal-cluster.js'
import { ensureNamespace } from './temporal-namespace.js'
import { ensureTemporalSchemas } from './temporal-schemas.js'
import { prepareUiServer } from './temporal-ui.js'
import { waitForStackReady } from './readiness.js'
import { answersOk, waitUntil, type WaitOptions } from './wait.js'

/** How long each part may take to become ready before the start is given up. */
const READY_TIMEOUT_MS = 180_000

export class DevStack {
  private readonly paths: StackPaths
  private readonly apis: Replica[]
  private readonly workers: Replica[]
  private readonly output: StackOutput
  private readonly supervisor: Supervisor
  /** Planned once the stack's LAN is up, which gives them their addresses. */
  private hosts: HostPlan[] = []
  /** Aborted when the stack begins to stop: cuts readiness waits short, forbids new components. */
  private readonly stopping = new AbortController()
  /** Set once this stack holds the data directory: until then, stopping must touch none of it. */
  private claimed = false
  private finished: Promise<void> | null = null

  constructor (private readonly config: StackConfig) {
    this.paths = stackPaths(config.dataDir)
    this.apis = planApiReplicas(config)
    this.workers = planWorkerReplicas(config)
    this.output = new StackOutput(this.paths.logDir)
    this.supervisor = new Supervisor(this.paths.runDir, this.output, config.maxRestartDelayMs)
  }

  log (message: string): void {
    this.output.log(message)
  }

  async start (): Promise<StackInfo> {
    const started = Date.now()
    const { config, paths } = this
    await claimDataDir(paths.dataDir, paths.runDir, (message) => this.log(message))
    this.claimed = true
    this.log(`data directory ${paths.dataDir}`)

    const [apiToken, viewerToken, agentToken] = await Promise.all([
      loadOrCreateSecret(paths.apiTokenFile, config.apiToken),
      loadOrCreateSecret(paths.viewerTokenFile, config.viewerToken),
      loadOrCreateSecret(paths.agentTokenFile)
    ])
    const tools = await ensureTemporalTools({ temporalCli: config.temporalCli, log: (message) => this.log(message) })
    await checkEntryPoints()
    const hypervisor = await chooseHypervisor(config.cloudHypervisor)
    this.log(`host agents run ${hypervisor.simulated ? 'the Cloud Hypervisor simulator' : hypervisor.binary}`)

    // Every process of this stack carries its data directory in its environment (pid-files.ts).
    const baseEnv = { ...process.env, [DATA_DIR_MARK]: paths.dataDir }
    const postgres = this.startPostgres(baseEnv)
    const [databaseUrl] = await Promise.all([
      postgres.then((server) => this.migrateDatabase(server)),
      config.temporalShape === 'dev'
        ? this.startDevServer(tools.temporal, baseEnv)
        : this.startCluster(tools.temporal, postgres, baseEnv)
    ])

    const context: ComponentContext = {
      config,
      env: {
        ...baseEnv,
        VMPLANE_LOG_PRETTY: '1',
        VMPLANE_TEMPORAL_ADDRESS: temporalAddress(config),
        VMPLANE_TEMPORAL_NAMESPACE: config.namespace,
        VMPLANE_TASK_QUEUE: config.taskQueue,
        // Fault tests arm crash points (faults/crash-points.ts) by setting this at all; the
        // components are told where the plan and the PID files are.
        ...(process.env.VMPLANE_CRASH_POINTS === undefined ? {} : { VMPLANE_CRASH_POINTS: paths.runDir })
      },
      databaseUrl,
      apiToken,
      viewerToken,
      agentToken
    }
    for (const worker of this.workers) this.startComponent(workerSpec(context, worker))
    // What the agents call in the root namespace, across the LAN: Temporal, and the API (or its
    // HAProxy) for their leases.
    const lan = await ensureStackLan(paths.dataDir, [config.temporalPort, config.apiPort])
    this.log(`the hosts are on ${lan.subnet} (${lan.netns}); the root namespace is ${lan.gateway} on it`)
    await this.removeLeftoverNetworks()
    this.hosts = planHosts(config, paths, lan)
    for (const host of this.hosts) {
      await mkdir(host.stateDir, { recursive: true })
      await ensureHostNetwork(host.netns)
      await attachHost(lan, host.netns, host.id, host.address)
      if (hypervisor.simulated) await writeStandInImages(host.imageDir)
      else await mkdir(host.imageDir, { recursive: true })
      if (config.hostLeases) this.startComponent(watchdogSpec(context, host))
      this.startComponent(agentSpec(context, host, hypervisor, lan))
    }
    for (const api of this.apis) this.startComponent(apiSpec(context, api))
    if (this.apis.length > 1) await this.startBalancer(baseEnv)
    const apiUrls = this.apis.map((api) => api.url)
    // Each host must have announced the images it was given before a create may name them.
    const images = hypervisor.simulated ? [STAND_IN_BASE_IMAGE] : []
    const hosts = this.hosts.map(({ id, url, stateDir, imageDir, storageDir, netns }) => ({ id, url, stateDir, imageDir, storageDir, netns, images }))
    // Readiness only reads, so it spends the viewer's rate limit, not the operator's.
    await waitForStackReady({ apiUrl: apiUrl(config), apiUrls, apiToken: viewerToken, hosts }, {
      timeoutMs: READY_TIMEOUT_MS,
      signal: this.stopping.signal,
      detail: () => `the components' output is in ${displayPath(paths.logDir)}`
    })

    if (await ensureDefaultNetwork({ apiUrl: apiUrl(config), apiToken }) === 'created') {
      this.log(`created the network ${DEFAULT_NETWORK} (${DEFAULT_NETWORK_CIDR}), which instances are on unless they say otherwise`)
    }

    const info: StackInfo = {
      apiUrl: apiUrl(config),
      apiUrls,
      docsUrl: `${apiUrl(config)}/docs`,
      metricsUrls: {
        ...Object.fromEntries(this.apis.map((api) => [api.component, `${api.url}/metrics`])),
        ...Object.fromEntries(this.workers.map((worker) => [worker.component, worker.url])),
        ...Object.fromEntries(this.hosts.map((host) => [host.component, `${host.url}/metrics`]))
      },
      temporalAddress: temporalAddress(config),
      temporalShape: config.temporalShape,
      temporalUiUrl: temporalUiUrl(config),
      namespace: config.namespace,
      taskQueue: config.taskQueue,
      databaseUrl,
      apiToken,
      viewerToken,
      agentToken,
      hosts,
      lan,
      startedAt: new Date().toISOString()
    }
    this.stopping.signal.throwIfAborted()
    await writeStackFile(paths.stackFile, info)
    this.printReady(info, Date.now() - started)
    return info
  }

  /** The stack's own PostgreSQL up and accepting connections; null when DATABASE_URL names another. */
  private async startPostgres (env: NodeJS.ProcessEnv): Promise<PostgresServer | null> {
    if (this.config.databaseUrl !== null) return null
    const password = await loadOrCreateSecret(this.paths.postgresPasswordFile)
    const server = await preparePostgres(this.paths, this.config.pgPort, password, env, (message) => this.log(message))
    this.startComponent(server.spec)
    await waitForPostgres(server.adminUrl, this.waitOptions('postgres'))
    return server
  }

  /** vmplane's database (on the stack's PostgreSQL, or DATABASE_URL's), migrated; its URL. */
  private async migrateDatabase (server: PostgresServer | null): Promise<string> {
    if (server !== null) await ensureDatabase(server)
    const databaseUrl = server?.databaseUrl ?? this.config.databaseUrl!
    const { from, to } = await migrate(databaseUrl)
    this.log(from === to ? `database schema at version ${to}` : `migrated the database schema from version ${from} to ${to}`)
    return databaseUrl
  }

  private async startDevServer (temporal: string, env: NodeJS.ProcessEnv): Promise<void> {
    await mkdir(dirname(this.paths.temporalDb), { recursive: true })
    this.startComponent(temporalSpec(temporal, this.config, this.paths, env))
    await waitForTemporal(temporal, temporalAddress(this.config), this.waitOptions('temporal'))
  }

  /**
   * The cluster shape: Temporal's server built (minutes, the first time) while PostgreSQL
   * starts, then its schemas, the server, and what vmplane needs registered in it.
   */
  private async startCluster (temporal: string, postgres: Promise<PostgresServer | null>, env: NodeJS.ProcessEnv): Promise<void> {
    const log = (message: string): void => this.log(message)
    const [tools, server, dbPassword] = await Promise.all([
      ensureTemporalServer({ log }),
      postgres,
      loadOrCreateSecret(this.paths.temporalDbPasswordFile)
    ])
    // The configuration refuses VMPLANE_TEMPORAL=cluster with a DATABASE_URL (config.ts).
    if (server === null) throw new Error('the cluster shape runs Temporal on the stack\'s own PostgreSQL')
    for (const line of await ensureTemporalSchemas(server, tools.sqlTool, dbPassword)) this.log(`Temporal's database ${line}`)
    this.startComponent(await prepareClusterServer({ server: tools.server, config: this.config, paths: this.paths, postgres: server, dbPassword, env }))
    this.startComponent(await prepareUiServer(tools.ui, this.config, this.paths, env))
    const address = temporalAddress(this.config)
    await Promise.all([
      (async () => {
        await waitForTemporal(temporal, address, this.waitOptions('temporal'))
        const created = await ensureNamespace({ temporal, address, namespace: this.config.namespace }, this.waitOptions('temporal'))
        if (created.length > 0) this.log(`registered in Temporal: ${created.join(', ')}`)
      })(),
      waitUntil('the Temporal UI answering', () => answersOk(temporalUiUrl(this.config)), this.waitOptions('temporal-ui'))
    ])
  }

  /** Housekeeping: a failure to clean up after other stacks is said, and does not stop this one. */
  private async removeLeftoverNetworks (): Promise<void> {
    try {
      const removed = await removeLeftoverNetworks(this.paths.dataDir)
      if (removed.length > 0) this.log(`removed the networks dev stacks that are gone left behind: ${removed.map((prefix) => `${prefix}*`).join(', ')}`)
    } catch (error) {
      this.log(`could not remove the networks dev stacks that are gone left behind: ${(error as Error).message}`)
    }
  }

  private startComponent (spec: ComponentSpec): void {
    this.stopping.signal.throwIfAborted()
    this.supervisor.start(spec)
  }

  /** HAProxy on the API port, in front of the API replicas. */
  private async startBalancer (env: NodeJS.ProcessEnv): Promise<void> {
    const haproxy = await ensureHaproxy({ log: (message) => this.log(message) })
    this.startComponent(await balancerSpec(haproxy, this.paths.balancerConfig, this.config.apiPort, this.apis, env))
  }

  private waitOptions (component: string): WaitOptions {
    return {
      timeoutMs: READY_TIMEOUT_MS,
      signal: this.stopping.signal,
      detail: () => `its output is in ${displayPath(this.paths.logDir)}/${component}.log`
    }
  }

  private printReady (info: StackInfo, tookMs: number): void {
    const lines = [
      `vmplane is ready (${Math.round(tookMs / 100) / 10} s)`,
      `  API          ${info.apiUrl}${info.apiUrls.length > 1 ? ` (HAProxy in front of ${info.apiUrls.join(', ')})` : ''}`,
      `  API docs     ${info.docsUrl}`,
      `  Temporal UI  ${info.temporalUiUrl}`,
      ...info.temporalShape === 'cluster'
        ? [`  Temporal     ${info.temporalAddress}: Temporal's server on PostgreSQL, ${HISTORY_SHARDS} history shards`]
        : [],
      ...Object.entries(info.metricsUrls).map(([component, url]) => `  metrics      ${url} (${component})`),
      // Where the tokens are, never the tokens: this goes to logs/stack.log too.
      `  API token    in ${displayPath(this.paths.apiTokenFile)} (fleet operator), ${displayPath(this.paths.viewerTokenFile)} (fleet viewer)`,
      `  hosts        ${info.hosts.map((host) => `${host.id} (agent ${host.url})`).join(', ')}`,
      `  try:         curl -H "Authorization: Bearer $(cat ${displayPath(this.paths.apiTokenFile)})" ${info.apiUrl}/v1/instances`,
      'Ctrl-C stops the stack (VMs keep running and are re-adopted by the next start).'
    ]
    for (const line of lines) this.log(line)
  }

  /** Stops everything in order (see the top of this file); VMMs keep running. */
  async stop (): Promise<void> {
    this.stopping.abort()
    if (!this.claimed) return await this.output.close()
    this.log('stopping')
    await removeStackFile(this.paths.stackFile)
    // A watchdog stops with its agent: left alone it would fence the VMMs kept for the next start.
    const hostParts = this.hosts.flatMap((host) => [host.component, host.watchdogComponent])
    await this.supervisor.stop([...[...this.apis, ...this.workers].map((part) => part.component), ...hostParts, 'temporal-ui', BALANCER_COMPONENT])
    await this.supervisor.stop(['temporal'])
    await this.supervisor.stop(['postgres'])
    await this.finish()
  }

  /** Kills every component at once (a second Ctrl-C); VMMs keep running. */
  async kill (): Promise<void> {
    this.stopping.abort()
    if (!this.claimed) return await this.output.close()
    this.log('killing every component')
    await removeStackFile(this.paths.stackFile)
    await this.supervisor.killAll()
    await this.finish()
  }

  private finish (): Promise<void> {
    this.finished ??= (async () => {
      const vmms = await findVmmProcesses(this.paths.dataDir)
      // The hosts' networks and their LAN stay with the VMMs that use them; with none left, they go.
      if (vmms.length === 0) await removeStackNetwork(this.paths.dataDir)
      this.log(vmms.length === 0
        ? 'stopped; no VMM is running'
        : `stopped; ${vmms.length} VMM process(es) left running, for the next start to re-adopt`)
      releaseDataDir(this.paths.runDir)
      await this.output.close()
    })()
    return this.finished
  }
}

/** A path as short as it can be told: relative to the working directory when inside it. */
function displayPath (path: string): string {
  const inside = relative(process.cwd(), path)
  return inside.startsWith('..') || isAbsolute(inside) ? path : inside
}
