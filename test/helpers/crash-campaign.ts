/**
 * The crash campaign (docs/design.md I3, I5; the answer to crossplane/upjet #305): N instances, each
 * with a boot disk, a data disk, an interface and cloud-init, in two projects (every other one in
 * each, each project with a network of its own), created and started across the stack's hosts
 * through the HTTP API with bounded concurrency, then all stopped, then all deleted;
 * during each phase the components its strikes name are SIGKILLed at random moments, several
 * times, and the dev stack restarts them: on the dev shape the worker and a host agent
 * (`DEV_STRIKES`), on the cluster shape a worker replica, an API replica and Temporal's server, and
 * PostgreSQL killed and cleanly restarted once a phase (`CLUSTER_STRIKES`). In the create phase the
 * worker and an agent are also killed at the agents' device points (a disk or a TAP just made);
 * and the worker is frozen for longer than the workflow task timeout, so that tasks it held time
 * out and run again. The client is a careful one:
 * every request carries an Idempotency-Key and is retried with it while the API cannot answer,
 * and the concurrency bounds operations, not requests: a slot is free again once its instance's
 * operation has ended (the API answers 202 at once; without this bound the campaign would only
 * measure how deep a backlog the stack can queue).
 *
 * After each phase the campaign waits until every instance is at the phase's state with nothing
 * in flight (a reconcile period or two, for anything it must re-drive), then checks the invariants against PostgreSQL, the agents and the processes
 * (test/helpers/invariants.ts). The report counts orphan VMMs, duplicate VMMs, leaked
 * reservations, orphan disks, orphan TAPs, leaked and duplicate addresses, and instances not at
 * their intended state (all targets 0), and what the
 * reconciler did meanwhile. At the end every execution the campaign caused is replayed on this
 * build, as a restarted worker would: one that does not replay is an instance stuck until an
 * operator resets it (target 0 too).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Client } from '@temporalio/client'
import { createPool, type Pool } from '../../db/pool.js'
import { checkInvariants, violationsOf, type InvariantReport } from './invariants.js'
import type { CrashPlan } from '../../faults/crash-points.js'
import { armCrashPlan, crashPlanArmed, disarmCrashPlan } from './crash-plans.js'
import { STAND_IN_BASE_IMAGE } from '../../stack/hypervisor.js'
import type { ComponentName, LaunchedStack } from './launcher.js'
import { replayExecutions } from './replay-executions.js'
import { withTemporalClient } from './temporal-client.js'
import { ensureSecondProject, projectPathOf } from './projects.js'
import { sendUntilAnswered } from './retrying-client.js'
import { replicasOf, type StackInfo } from '../../stack/stack-file.js'
import { waitFor } from '../../stack/wait.js'

export interface CampaignOptions {
  instances: number
  /** Requests in flight at once. */
  concurrency: number
  /** What each crash round strikes, and what is struck once a phase. */
  strikes: readonly StrikeKind[]
  /** Crash rounds in each phase: one strike of each `round` kind. */
  crashesPerPhase: number
  /** Freezes of the worker (SIGSTOP, then SIGCONT after `FREEZE_MS`) in each phase. */
  freezesPerPhase: number
  /** How long a phase may take to converge once its operations have ended. */
  convergeTimeoutMs: number
  log: (line: string) => void
}

/**
 * A kind of strike: a signal to one of the components `among` names, picked at random at each
 * strike, in every crash round or once a phase. The signal ends the process and the stack's
 * supervisor starts another.
 */
export interface StrikeKind {
  among: (info: StackInfo) => ComponentName[]
  every: 'round' | 'phase'
  /** SIGKILL, a crash; SIGINT asks PostgreSQL for a fast shutdown, a clean restart. */
  signal: 'SIGKILL' | 'SIGINT'
}

/** The dev shape's: the worker and a host agent, in every round. */
export const DEV_STRIKES: readonly StrikeKind[] = [
  { among: () => ['worker'], every: 'round', signal: 'SIGKILL' },
  { among: (info) => info.hosts.map((host) => `agent-${host.id}`), every: 'round', signal: 'SIGKILL' }
]

/**
 * The cluster shape's: a worker replica, an API replica and Temporal's server in every round;
 * PostgreSQL, which all of them stand on, killed once a phase and restarted cleanly once a phase.
 */
export const CLUSTER_STRIKES: readonly StrikeKind[] = [
  { among: (info) => replicasOf(info, 'worker'), every: 'round', signal: 'SIGKILL' },
  { among: (info) => replicasOf(info, 'api'), every: 'round', signal: 'SIGKILL' },
  { among: () => ['temporal'], every: 'round', signal: 'SIGKILL' },
  { among: () => ['postgres'], every: 'phase', signal: 'SIGKILL' },
  { among: () => ['postgres'], every: 'phase', signal: 'SIGINT' }
]

/** The stack settings the campaign runs with: room for every instance, a brisk reconciler. */
export const CAMPAIGN_STACK_ENV = {
  VMPLANE_HOST_VCPUS: '100000',
  VMPLANE_HOST_MEMORY_MIB: '100000000',
  // The disks are sparse: 4,000 instances' 3 GiB each take a few hundred MiB of real space.
  VMPLANE_STORAGE_GIB: '100000',
  VMPLANE_RECONCILE_SECONDS: '15',
  VMPLANE_ORPHAN_GRACE_SECONDS: '20',
  // Crash plans (faults/crash-points.ts) for the kills at the agents' device points.
  VMPLANE_CRASH_POINTS: '1'
}

export interface PhaseReport {
  requests: number
  converged: boolean
  /** When the phase did not converge: each instance not at its state, with its operation in flight. */
  pending: string[]
  /** From the first request to every instance at the phase's state. */
  convergedSeconds: number
  perSecond: number
  /** Requests sent again (same Idempotency-Key) because the API could not answer. */
  retries: number
  kills: string[]
}

export interface InvariantCounts {
  orphanVmms: number
  duplicateVmms: number
  leakedReservations: number
  orphanDisks: number
  orphanTaps: number
  /** Segments' bridges and VXLAN devices of networks no live VMM on their host has an interface on. */
  orphanSegments: number
  /** Firewall rules of segments gone, or segments without their rules. */
  firewallDrift: number
  leakedAddresses: number
  duplicateAddresses: number
  notAtIntent: number
  operationsInFlight: number
}

export interface CampaignReport {
  instances: number
  hosts: number
  concurrency: number
  phases: Record<'create' | 'stop' | 'delete', PhaseReport>
  /** Checked with every instance running, and again at the end, after a reconcile pass. */
  afterCreate: InvariantCounts
  afterRun: InvariantCounts
  /** Executions replayed at the end, and those that did not replay (workflow ID, run ID, error). */
  replayed: number
  notReplaying: string[]
  /**
   * Components' processes that ended without the campaign ending them (a crash of their own), with
   * the last lines of the component's log: target none.
   */
  unexpectedExits: string[]
  violations: string[]
  /** What the reconciler's passes during the campaign found and did, by kind. */
  reconcilerActions: Record<string, number>
}

/** A slot waits this long at most for its operation; convergence then finds what did not end. */
const OPERATION_WAIT_MS = 300_000

interface Phase {
  name: 'create' | 'stop' | 'delete'
  target: 'running' | 'stopped' | 'destroyed'
  send: (index: number) => Promise<void>
}

export async function runCampaign (stack: LaunchedStack, options: CampaignOptions): Promise<CampaignReport> {
  // A pool, not a client: a connection PostgreSQL's restart ends is replaced by the next query.
  const db = createPool(stack.info.databaseUrl, 2)
  const began = new Date()
  const ids: string[] = []
  const projects = await ensureSecondProject(stack, 'campaign-b', '10.79.0.0/16')
  const projectOf = (i: number): string => projectPathOf(projects, i)
  let retries = 0
  const send = async (method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<string> => {
    const response = await sendUntilAnswered<{ instance: { id: string } }>(stack, method, path, body, {
      timeoutMs: 600_000,
      onRetry: () => { retries++ }
    })
    if (response.status !== 202 && response.status !== 200) throw new Error(`${method} ${path} answered ${response.status}: ${JSON.stringify(response.body)}`)
    return response.body.instance.id
  }
  const operations = new OperationWatch(db)
  const phases: Phase[] = [
    {
      name: 'create',
      target: 'running',
      send: async (i) => {
        ids[i] = await send('POST', `${projectOf(i)}/instances`, {
          name: `campaign-${i}`,
          vcpus: 1,
          memoryMiB: 64,
          boot: { kernel: 'vmlinux', initramfs: 'initrd.img', cmdline: 'console=ttyS0' },
          bootDisk: { image: STAND_IN_BASE_IMAGE },
          dataDisks: [{ name: 'data', sizeGiB: 1 }],
          sshKeys: [CAMPAIGN_SSH_KEY]
        })
        await operations.ended(ids[i]!)
      }
    },
    {
      name: 'stop',
      target: 'stopped',
      send: async (i) => {
        await send('POST', `${projectOf(i)}/instances/${ids[i]}/stop`, { graceSeconds: 5 })
        await operations.ended(ids[i]!)
      }
    },
    {
      name: 'delete',
      target: 'destroyed',
      send: async (i) => {
        await send('DELETE', `${projectOf(i)}/instances/${ids[i]}?graceSeconds=0`)
        await operations.ended(ids[i]!)
      }
    }
  ]

  try {
    const reports: Partial<Record<Phase['name'], PhaseReport>> = {}
    /** Every component the campaign ended, once per kill, with when. */
    const killed: Strike[] = []
    let afterCreate: InvariantReport | null = null
    for (const phase of phases) {
      retries = 0
      const started = Date.now()
      let sent = false
      const pointKills = phase.name === 'create' ? killAtDevicePoints(stack, () => sent, killed, options.log) : Promise.resolve([])
      // Both settle before a failure of either is thrown: the device points' plans end once the
      // sending does, and are taken back rather than left running behind the failure.
      const [sending, pointKilled] = await Promise.allSettled([sendAll(stack, phase, options, killed).finally(() => { sent = true }), pointKills])
      if (sending.status === 'rejected') throw sending.reason
      if (pointKilled.status === 'rejected') throw pointKilled.reason
      const kills = [...sending.value, ...pointKilled.value]
      const operationsSeconds = (Date.now() - started) / 1000
      options.log(`${phase.name}: ${options.instances} operations ended in ${operationsSeconds.toFixed(1)} s; waiting for every instance to be ${phase.target}`)
      const converged = await convergence(db, phase.target, options)
      const convergedSeconds = (Date.now() - started) / 1000
      const pending = converged ? [] : await notConverged(stack.info, db, phase.target)
      for (const line of pending) options.log(`${phase.name}: not converged: ${line}`)
      reports[phase.name] = { requests: options.instances, converged, pending, convergedSeconds, perSecond: options.instances / convergedSeconds, retries, kills }
      options.log(`${phase.name}: ${converged ? 'converged' : 'did NOT converge'} in ${convergedSeconds.toFixed(1)} s (${(options.instances / convergedSeconds).toFixed(1)} instances/s)`)
      if (phase.name === 'create') afterCreate = await settledInvariants(stack)
    }
    // A last pass, once the orphan grace period is over: anything left behind is reaped now or
    // counted below.
    await sleep(Number(CAMPAIGN_STACK_ENV.VMPLANE_ORPHAN_GRACE_SECONDS) * 1000)
    await reconcilePass(stack, db)
    const afterRun = await settledInvariants(stack)
    const { replayed, failures: notReplaying } = await replayExecutions(stack.info)
    const unexpectedExits = await exitsNotKilled(stack, killed)
    return {
      instances: options.instances,
      hosts: stack.info.hosts.length,
      concurrency: options.concurrency,
      phases: reports as CampaignReport['phases'],
      afterCreate: countsOf(afterCreate!),
      afterRun: countsOf(afterRun),
      replayed,
      notReplaying,
      unexpectedExits,
      violations: [...violationsOf(afterCreate!), ...violationsOf(afterRun), ...notReplaying, ...unexpectedExits].slice(0, 50),
      reconcilerActions: await reconcilerActionsSince(db, began)
    }
  } finally {
    operations.close()
    await db.end()
  }
}

/**
 * Resolves `ended(id)` once the instance has no operation in flight and is in a state that is
 * not on the way to another: one query for every instance waited on, five times a second.
 */
class OperationWatch {
  private readonly waiting = new Map<string, () => void>()
  private readonly timer: NodeJS.Timeout
  private polling = false

  constructor (private readonly db: Pool) {
    // A failed poll (PostgreSQL busy or restarting) is simply tried again at the next tick.
    this.timer = setInterval(() => { this.poll().catch(() => {}) }, 200)
  }

  /** Resolves when the instance's operation has ended, or after `OPERATION_WAIT_MS` in any case. */
  async ended (id: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await new Promise<void>((resolve) => {
      this.waiting.set(id, resolve)
      timer = setTimeout(resolve, OPERATION_WAIT_MS)
    })
    clearTimeout(timer)
    this.waiting.delete(id)
  }

  close (): void {
    clearInterval(this.timer)
  }

  private async poll (): Promise<void> {
    if (this.polling || this.waiting.size === 0) return
    this.polling = true
    try {
      const { rows } = await this.db.query(
        `SELECT i.id FROM instances i
          WHERE i.id = ANY($1::uuid[]) AND i.state IN ('running', 'stopped', 'failed', 'destroyed')
            AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.instance_id = i.id AND o.finished_at IS NULL)`,
        [[...this.waiting.keys()]]
      )
      for (const { id } of rows) {
        this.waiting.get(id)?.()
        this.waiting.delete(id)
      }
    } finally {
      this.polling = false
    }
  }
}

/** A component to signal, and the signal. */
interface Victim {
  component: ComponentName
  signal: StrikeKind['signal'] | 'SIGSTOP'
}

/** A freeze of the worker, longer than a workflow task's timeout (3 s): its tasks time out and run again. */
const FROZEN_WORKER = 'worker frozen'
const FREEZE_MS = 5000

/** The key every campaign instance's cloud-init authorises (a test key, never a real one). */
const CAMPAIGN_SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAvmplaneCampaignKeyForTestsOnly0123456789 campaign@vmplane'

/**
 * Kills at the agents' device points during the create phase, one plan after another: the worker
 * while an agent has just made a disk, an agent having just made a TAP, an agent having just made
 * a disk, the worker while an agent has just made a TAP. A plan still armed when the phase's
 * requests are all sent is taken back. Returns what it killed.
 */
async function killAtDevicePoints (stack: LaunchedStack, sent: () => boolean, killed: Strike[], log: (line: string) => void): Promise<string[]> {
  const host = stack.info.hosts[0]!.id
  const plans: CrashPlan[] = [
    { point: 'agent.disk.after-create', kill: 'worker' },
    { point: 'agent.tap.after-create', kill: `agent-${host}`, host },
    { point: 'agent.disk.after-create', kill: `agent-${host}`, host },
    { point: 'agent.tap.after-create', kill: 'worker' }
  ]
  const kills: string[] = []
  for (const plan of plans) {
    if (sent()) break
    await stack.waitForRestart(plan.kill as ComponentName)
    await armCrashPlan(stack, plan)
    await waitFor(`the crash point ${plan.point}`, async () => !crashPlanArmed(stack) || sent() ? true : null, { timeoutMs: 3_600_000, intervalMs: 100 })
    if (await disarmCrashPlan(stack)) break
    killed.push({ component: plan.kill, at: Date.now() })
    kills.push(`${plan.kill} at ${plan.point}`)
    log(`create: SIGKILL ${plan.kill} at ${plan.point}`)
  }
  return kills
}

/**
 * Sends the phase's requests, `concurrency` at a time; strikes (`options.strikes`), and freezes the
 * worker, when the count of answered requests crosses random thresholds. Returns what it struck,
 * and when; adds each component it ended to `killed`.
 */
async function sendAll (stack: LaunchedStack, phase: Phase, options: CampaignOptions, killed: Strike[]): Promise<string[]> {
  const strike = (kind: StrikeKind): Victim => ({ component: pick(kind.among(stack.info)), signal: kind.signal })
  const victims: Victim[] = [
    ...Array.from({ length: options.crashesPerPhase }, () => options.strikes.filter((kind) => kind.every === 'round').map(strike)).flat(),
    ...options.strikes.filter((kind) => kind.every === 'phase').map(strike),
    ...Array.from({ length: options.freezesPerPhase }, () => ({ component: FROZEN_WORKER, signal: 'SIGSTOP' as const }))
  ]
  const plan = victims
    .map((victim) => ({ victim, at: Math.floor((0.05 + 0.9 * Math.random()) * options.instances) }))
    .sort((a, b) => a.at - b.at)
  const kills: string[] = []
  // Kills run one after another: two slots crossing thresholds together must not both signal
  // the same process before the supervisor has replaced it.
  let killing = Promise.resolve()
  const killNext = async ({ component, signal }: Victim, answered: number): Promise<void> => {
    // A component is killed only while it runs: one killed a moment ago is killed again once its
    // successor runs (one down for any other reason shows in the report's unexpected exits).
    if (component === FROZEN_WORKER) {
      await stack.waitForRestart('worker')
      const pid = await stack.kill('worker', 'SIGSTOP')
      options.log(`${phase.name}: SIGSTOP worker for ${FREEZE_MS / 1000} s after ${answered} of ${options.instances} requests`)
      await sleep(FREEZE_MS)
      await stack.kill('worker', 'SIGCONT')
      kills.push(`${FROZEN_WORKER} (pid ${pid}, ${FREEZE_MS / 1000} s) after ${answered} requests`)
      return
    }
    await stack.waitForRestart(component)
    const at = Date.now()
    const pid = await stack.kill(component, signal)
    killed.push({ component, at })
    kills.push(`${component} (pid ${pid}${signal === 'SIGKILL' ? '' : `, ${signal}`}) after ${answered} requests`)
    options.log(`${phase.name}: ${signal} ${component} after ${answered} of ${options.instances} requests`)
  }
  let next = 0
  let answered = 0
  let failed = false
  const worker = async (): Promise<void> => {
    while (next < options.instances) {
      if (failed) return
      const index = next++
      await phase.send(index)
      answered++
      while (plan.length > 0 && plan[0]!.at <= answered) {
        const { victim } = plan.shift()!
        const at = answered
        killing = killing.then(async () => await killNext(victim, at))
        await killing
      }
    }
  }
  // A slot that fails stops the others from taking more requests, and the phase's failure waits
  // for the requests in flight: a campaign that throws leaves nothing behind it retrying against
  // a stack torn down (each for up to 10 minutes, which held the test's process open).
  const slots = await Promise.allSettled(Array.from({ length: Math.min(options.concurrency, options.instances) }, async () => {
    await worker().catch((error: unknown) => { failed = true; throw error })
  }))
  const failure = slots.find((slot) => slot.status === 'rejected')
  if (failure !== undefined) throw failure.reason
  return kills
}

/**
 * Waits until every campaign instance is at `target` with no operation in flight; false if that
 * has not happened within the timeout (the invariants then count what is not).
 */
async function convergence (db: Pool, target: string, options: CampaignOptions): Promise<boolean> {
  let last = ''
  return await waitFor(`every instance ${target}`, async () => {
    const { rows } = await db.query(
      `SELECT count(*) FILTER (WHERE i.state <> $1 OR EXISTS (SELECT 1 FROM operations o WHERE o.instance_id = i.id AND o.finished_at IS NULL))::int AS pending,
              string_agg(DISTINCT i.state, ', ') FILTER (WHERE i.state <> $1) AS states
         FROM instances i WHERE i.name LIKE 'campaign-%'`,
      [target]
    )
    last = `${rows[0].pending} not yet ${target} (${rows[0].states ?? 'operations in flight'})`
    return rows[0].pending === 0 ? true : null
  }, { timeoutMs: options.convergeTimeoutMs, intervalMs: 1000, detail: () => last }).catch((err: Error) => {
    options.log(err.message)
    return false
  })
}

/**
 * Each campaign instance not at `target` or with an operation in flight, with what its workflow
 * waits on (its status and pending activities, their attempts and last failures): what a failed
 * convergence names.
 */
async function notConverged (info: StackInfo, db: Pool, target: string): Promise<string[]> {
  const { rows } = await db.query(
    `SELECT i.name, i.id, i.state, o.kind, o.status, o.workflow_id, o.started_at
       FROM instances i
       LEFT JOIN operations o ON o.instance_id = i.id AND o.finished_at IS NULL
      WHERE i.name LIKE 'campaign-%' AND (i.state <> $1 OR o.id IS NOT NULL)
      ORDER BY i.name`,
    [target]
  )
  return await withTemporalClient(info, async (client) => await Promise.all(rows.map(async (row) => {
    const instance = `${row.name} (${row.id}) ${row.state}`
    if (row.kind === null) return `${instance}, no operation in flight`
    return `${instance}, ${row.kind} since ${row.started_at}: ${await workflowWaits(client, row.workflow_id)}`
  })))
}

async function workflowWaits (client: Client, workflowId: string): Promise<string> {
  try {
    const { status, raw } = await client.workflow.getHandle(workflowId).describe()
    const activities = (raw.pendingActivities ?? []).map((activity) =>
      `${activity.activityType?.name ?? '?'} attempt ${activity.attempt ?? 0}${activity.lastFailure?.message != null ? ` (${activity.lastFailure.message})` : ''}`)
    return `workflow ${workflowId} ${status.name}${activities.length > 0 ? `, waiting on ${activities.join(', ')}` : ''}`
  } catch (err) {
    return `workflow ${workflowId}: ${(err as Error).message}`
  }
}

/** The invariants, once the agents answer (one may just have been restarted). */
async function settledInvariants (stack: LaunchedStack): Promise<InvariantReport> {
  await stack.waitForReady()
  return await checkInvariants(stack.info)
}

async function reconcilePass (stack: LaunchedStack, db: Pool): Promise<void> {
  const since = new Date()
  // Sent again until the API answers, should a component be restarting.
  await sendUntilAnswered(stack, 'POST', '/v1/admin/reconcile')
  await waitFor('a reconcile pass after the campaign', async () => {
    const { rows } = await db.query('SELECT 1 FROM reconcile_passes WHERE started_at >= $1', [since])
    return rows.length > 0 ? true : null
  }, { timeoutMs: 120_000, intervalMs: 500 })
}

async function reconcilerActionsSince (db: Pool, since: Date): Promise<Record<string, number>> {
  const { rows } = await db.query(
    `SELECT kind, sum(value::int)::int AS n FROM reconcile_passes, jsonb_each_text(counts) AS c(kind, value)
      WHERE started_at >= $1 AND kind <> 'hostsChecked' GROUP BY kind ORDER BY kind`,
    [since]
  )
  return Object.fromEntries(rows.map((row) => [row.kind, row.n]))
}

/** A component the campaign ended, and when (ms since the epoch). */
interface Strike {
  component: string
  at: number
}

/**
 * What a process that could not reach its database writes last: Temporal's server, which exits
 * when it cannot reach PostgreSQL as it starts (a service manager starts it again), either at once
 * or, when PostgreSQL went down in the middle of its start, once its internal worker service has
 * waited out its start's deadline (run 53: started again 2 s before a clean restart of PostgreSQL,
 * it logged `Unable to start worker` with `context deadline exceeded` 12 s later, and exited 1).
 */
const DATABASE_UNREACHABLE = /no usable database connection found|"msg":"Unable to start worker","error":"context deadline exceeded"/
/** How long PostgreSQL may be down after a strike: the supervisor restarts it within seconds. */
const POSTGRES_OUTAGE_MS = 30_000

/**
 * The exits of every component (whatever the stack's shape: PostgreSQL, Temporal, each replica,
 * HAProxy, the agents) beyond the campaign's own kills, each component's with its supervisor's
 * notes and, for each exit a SIGKILL does not explain, the lines its process wrote last.
 *
 * An exit the campaign caused without killing the process is not counted: one whose last lines
 * say it could not reach its database, within POSTGRES_OUTAGE_MS of a strike on PostgreSQL.
 * Temporal's server, started again by the supervisor once PostgreSQL answered, exits if PostgreSQL
 * is struck in the moment it takes to connect (stop 32's CI: a restart 0.1 s before the strike).
 */
async function exitsNotKilled (stack: LaunchedStack, killed: Strike[]): Promise<string[]> {
  const found: string[] = []
  const postgresStrikes = killed.filter((strike) => strike.component === 'postgres').map((strike) => strike.at)
  const causedByPostgresStrike = ({ at, before }: { at: number, before: string[] }): boolean =>
    before.some((line) => DATABASE_UNREACHABLE.test(line)) &&
      postgresStrikes.some((struck) => struck <= at && at - struck <= POSTGRES_OUTAGE_MS)
  for (const component of await stack.components()) {
    const exits = (await stack.exitsOf(component)).filter((exit) => !causedByPostgresStrike(exit))
    const kills = killed.filter((strike) => strike.component === component).length
    if (exits.length <= kills) continue
    const unexplained = exits.filter((exit) => !exit.note.includes('signal SIGKILL'))
    found.push([
      `${component} ended ${exits.length} times, killed ${kills}:`,
      ...exits.map((exit) => exit.note),
      ...unexplained.flatMap((exit) => [`before ${exit.note}:`, ...exit.before])
    ].join('\n'))
  }
  return found
}

function countsOf (report: InvariantReport): InvariantCounts {
  return {
    orphanVmms: report.orphanProcesses.length + report.orphanRecords.length,
    duplicateVmms: report.duplicates.length,
    leakedReservations: report.leakedReservations.length,
    orphanDisks: report.orphanDisks.length,
    orphanTaps: report.orphanTaps.length,
    orphanSegments: report.orphanSegments.length,
    firewallDrift: report.firewallDrift.length,
    leakedAddresses: report.leakedAddresses.length,
    duplicateAddresses: report.duplicateAddresses.length,
    notAtIntent: report.notAtIntent.length,
    operationsInFlight: report.operationsInFlight.length
  }
}

function pick<T> (items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!
}
