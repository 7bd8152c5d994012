/**
 * Turns users' requests into workflow executions under the instance's workflow ID.
 *
 * - create: the instance's rows (with its disks and interfaces), the workflow start and the
 *   operation's row happen in one database transaction, so a create refused or failed before its
 *   start leaves nothing behind (never a half-created instance). Once the workflow has started,
 *   the create is accepted: the start is the durable decision, and the workflow makes the rows
 *   itself if they are missing when it opens (should this process die before committing). So a
 *   failure after the start (the operation's insert, the COMMIT: PostgreSQL restarting) is not
 *   the answer: the rows are inserted again in a transaction of their own, finding any the
 *   workflow made, and the answer is the accept. While PostgreSQL cannot be reached that is
 *   retried for a while (`RECORD_PATIENCE_MS`), then answered 503 for the client to retry with its
 *   Idempotency-Key; a retry that finds its create's workflow started by an earlier attempt is
 *   accepted the same way. Should the rows be refused by then (another create took the name or the
 *   address meanwhile), the answer is that problem: the workflow, refused the same when it opens,
 *   makes nothing.
 * - start, reboot and migrate: started with the "fail if running" conflict policy, so the workflow ID is
 *   the instance lock (I4). If the execution holding it has no operation in flight (it applies
 *   host reports), the request is handed over to it and runs next; otherwise the answer is 409
 *   naming the operation in flight.
 * - stop and delete: `signalWithStart`, so whatever execution runs receives the request and
 *   switches to the stop path (preemption); otherwise a new execution starts with it.
 *
 * - cancel of a migration: a signal to the execution running it, which cancels it unless its
 *   target already has the VM (workflows/migrate.ts).
 *
 * Requests that need nothing done (stopping a stopped instance) answer 200 and start nothing.
 * The operation's row is written once the workflow has it, and by the workflow too: whichever
 * comes first creates it.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client'
import fp from 'fastify-plugin'
import { placementStatusOf } from '../../db/hosts.js'
import { insertInstance } from '../../db/instances.js'
import { crashPoint } from '../../faults/crash-points.js'
import { insertOperation } from '../../db/operations.js'
import { inTransaction, type Pool, type PoolClient } from '../../db/pool.js'
import { verdictFor } from '../../domain/instance-rules.js'
import type { InstanceState } from '../../domain/instance.js'
import type { OperationKind } from '../../domain/operation.js'
import { instanceWorkflowId } from '../../domain/ids.js'
import { cancelMigrationSignal, haltRequestedSignal, operationRequestedSignal } from '../../contract/messages.js'
import { WORKFLOW_TYPES, operationStart } from '../../contract/workflows.js'
import type { CreateRequest, HaltRequest, HandoffRequest, NewInstance, OperationRequest } from '../../domain/requests.js'
import type { NewId } from '../plugins/idempotency.js'
import { ApiProblem, isDependencyUnavailable } from '../plugins/problem-details.js'
import { insertProblemAnswer, resolveResources, type ResourcesInput } from './instance-resources.js'
import type { InstanceView, InstancesRepository } from './instances-repository.js'

export interface Accepted {
  status: 200 | 202
  instance: InstanceView
  operation: Awaited<ReturnType<InstancesRepository['findOperation']>>
  message?: string
}

/**
 * How long a create whose workflow has started waits for PostgreSQL to record it: longer than
 * PostgreSQL takes to restart or fail over, well within what a client waits for an answer.
 */
const RECORD_PATIENCE_MS = 30_000
const RECORD_RETRY_MS = 500

export interface CreateInput extends ResourcesInput {
  name: string
  vcpus: number
  memoryMiB: number
  boot: NewInstance['boot']
  start: boolean
  stopGraceSeconds?: number
  restartPolicy: NewInstance['restartPolicy']
  onHostFailure: NonNullable<NewInstance['onHostFailure']>
}

interface Dependencies {
  db: Pool
  temporal: Client
  taskQueue: string
  repository: InstancesRepository
  defaultStopGraceSeconds: number
}

export function createInstanceRequests (deps: Dependencies) {
  const { db, temporal, repository } = deps

  function startOptions (request: OperationRequest, instance: { name: string, state: InstanceState, projectId?: string }) {
    return operationStart(request, instance, deps.taskQueue)
  }

  async function accepted (request: Pick<OperationRequest, 'instanceId' | 'operationId'>): Promise<Accepted> {
    const [instance, operation] = await Promise.all([repository.find(request.instanceId), repository.findOperation(request.operationId)])
    if (instance === null) throw new ApiProblem(404, 'Not Found', `instance ${request.instanceId} does not exist`)
    return { status: 202, instance, operation }
  }

  async function existing (id: string): Promise<InstanceView> {
    const instance = await repository.find(id)
    if (instance === null) throw new ApiProblem(404, 'Not Found', `instance ${id} does not exist`)
    return instance
  }

  /**
   * A request retried with its Idempotency-Key after the first attempt got as far as recording
   * its operation (the answer was lost): the same operation, accepted again.
   */
  async function alreadyAccepted (request: OperationRequest): Promise<Accepted | null> {
    const operation = await repository.findOperation(request.operationId)
    return operation === null ? null : await accepted(request)
  }

  /** Checks the request against the instance's state; answers at once when nothing is to be done. */
  function judge (kind: Exclude<OperationKind, 'create'>, instance: InstanceView): Accepted | null {
    const verdict = verdictFor(kind, instance.state, instance.operation?.kind ?? null)
    if (verdict.verdict === 'noop') return { status: 200, instance, operation: null, message: verdict.reason }
    if (verdict.verdict === 'conflict') throw conflict(instance, verdict.reason)
    return null
  }

  /**
   * Starts a start, reboot or migrate. If an execution holds the instance's workflow ID but its operation
   * is over (it is tidying up: applying late reports), the request is handed over to it and runs
   * next; if an operation is in flight, the answer is 409 naming it.
   */
  async function startOperation (request: HandoffRequest, instance: InstanceView): Promise<Accepted> {
    const options = startOptions(request, instance)
    let runId: string
    try {
      runId = (await temporal.workflow.start(WORKFLOW_TYPES[request.kind], { ...options, workflowIdConflictPolicy: 'FAIL' })).firstExecutionRunId
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err
      const current = await existing(instance.id)
      if (current.operation !== null) throw conflict(current, 'another operation is in flight')
      runId = (await temporal.workflow.signalWithStart(WORKFLOW_TYPES[request.kind], {
        ...options,
        signal: operationRequestedSignal,
        signalArgs: [request]
      })).signaledRunId
    }
    await insertOperation(db, request, runId)
    return await accepted(request)
  }

  async function halt (request: HaltRequest, instance: InstanceView): Promise<Accepted> {
    const handle = await temporal.workflow.signalWithStart(WORKFLOW_TYPES[request.kind], {
      ...startOptions(request, instance),
      signal: haltRequestedSignal,
      signalArgs: [request]
    })
    await insertOperation(db, request, handle.signaledRunId)
    return await accepted(request)
  }

  /** A create's rows, or the answer naming what the request asks that cannot be had. */
  async function insertCreated (tx: PoolClient, request: CreateRequest): Promise<void> {
    const inserted = await insertInstance(tx, request.instanceId, request.instance)
    if (!inserted.inserted) throw insertProblemAnswer(inserted.problem, request.instance.name, request.instance.disks ?? [])
  }

  /**
   * Starts a create's workflow: its run ID. Under an Idempotency-Key, the workflow may be running
   * already, started by an earlier attempt of this same request (the key is bound to it) whose
   * transaction did not commit: that run is the create's.
   */
  async function startCreate (request: CreateRequest): Promise<string> {
    const options = { ...startOptions(request, { name: request.instance.name, state: 'creating', projectId: request.instance.projectId }), workflowIdConflictPolicy: 'FAIL' as const }
    try {
      return (await temporal.workflow.start(WORKFLOW_TYPES.create, options)).firstExecutionRunId
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err
      return (await temporal.workflow.getHandle(options.workflowId).describe()).runId
    }
  }

  /**
   * Records a create whose workflow has started though its transaction failed: the rows again,
   * finding any the workflow made meanwhile, and the operation's. Waits out PostgreSQL for a
   * while; any other failure, and one that lasts, is the answer.
   */
  async function recordStarted (request: CreateRequest, runId: string): Promise<void> {
    const deadline = Date.now() + RECORD_PATIENCE_MS
    for (;;) {
      try {
        await inTransaction(db, async (tx) => {
          await insertCreated(tx, request)
          await insertOperation(tx, request, runId)
        })
        return
      } catch (err) {
        if (!isDependencyUnavailable(err) || Date.now() >= deadline) throw err
        await sleep(RECORD_RETRY_MS)
      }
    }
  }

  function base (instanceId: string, newId: NewId) {
    return { operationId: newId('operation'), instanceId, requestedAt: new Date().toISOString() }
  }

  return {
    /** Creates an instance in the project, charged to its quotas with its rows. */
    async create (projectId: string, input: CreateInput, newId: NewId): Promise<Accepted> {
      const instanceId = newId('instance')
      // A retry with the key of a create that went through finds the instance it made.
      if (await repository.find(instanceId) !== null) {
        return await accepted(base(instanceId, newId))
      }
      const resources = await resolveResources(db, projectId, input, newId)
      const instance: NewInstance = {
        projectId,
        name: input.name,
        vcpus: input.vcpus,
        memoryMiB: input.memoryMiB,
        boot: input.boot,
        stopGraceSeconds: input.stopGraceSeconds ?? deps.defaultStopGraceSeconds,
        restartPolicy: input.restartPolicy,
        onHostFailure: input.onHostFailure,
        intendedState: input.start ? 'running' : 'stopped',
        ...resources
      }
      const request: CreateRequest = { ...base(instanceId, newId), kind: 'create', instance, start: input.start }
      const started: { runId: string | null } = { runId: null }
      try {
        await inTransaction(db, async (tx) => {
          await insertCreated(tx, request)
          started.runId = await startCreate(request)
          crashPoint('create.after-workflow-start')
          await insertOperation(tx, request, started.runId)
        })
      } catch (err) {
        if (started.runId === null) throw err
        await recordStarted(request, started.runId)
      }
      return await accepted(request)
    },

    async start (id: string, newId: NewId): Promise<Accepted> {
      const instance = await existing(id)
      const request = { ...base(id, newId), kind: 'start' as const }
      return await alreadyAccepted(request) ?? judge('start', instance) ?? await startOperation(request, instance)
    },

    async reboot (id: string, newId: NewId): Promise<Accepted> {
      const instance = await existing(id)
      const request = { ...base(id, newId), kind: 'reboot' as const }
      return await alreadyAccepted(request) ?? judge('reboot', instance) ?? await startOperation(request, instance)
    },

    async migrate (id: string, targetHostId: string | undefined, newId: NewId): Promise<Accepted> {
      const instance = await existing(id)
      const request = { ...base(id, newId), kind: 'migrate' as const, ...(targetHostId === undefined ? {} : { targetHostId }) }
      const done = await alreadyAccepted(request) ?? judge('migrate', instance)
      if (done !== null) return done
      if (targetHostId !== undefined) await checkTargetHost(db, targetHostId, instance)
      return await startOperation(request, instance)
    },

    /**
     * Asks the execution running the instance's migration (the live one, or the one named) to
     * cancel it. 409 once it has committed or ended: nothing is left to cancel.
     */
    async cancelMigration (id: string, migrationId: string | undefined, requestedBy: string): Promise<Accepted> {
      const instance = await existing(id)
      const migration = migrationId === undefined
        ? instance.migration
        : await repository.findMigration(id, migrationId)
      if (migration === null) {
        throw migrationId === undefined
          ? conflict(instance, 'no migration is in progress')
          : new ApiProblem(404, 'Not Found', `instance ${instance.name} has no migration ${migrationId}`)
      }
      if (migration.phase === 'committed' || migration.finishedAt !== null) {
        throw conflict(instance, `migration ${migration.id} is ${migration.phase}: there is nothing left to cancel`)
      }
      try {
        await temporal.workflow.getHandle(instanceWorkflowId(id)).signal(cancelMigrationSignal, { migrationId: migration.id, requestedBy })
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) throw conflict(await existing(id), `migration ${migration.id} has ended`)
        throw err
      }
      return { ...await accepted({ instanceId: id, operationId: migration.id }), message: 'cancel requested: the migration ends cancelled unless its target already has the VM' }
    },

    async stop (id: string, graceSeconds: number | undefined, newId: NewId): Promise<Accepted> {
      const instance = await existing(id)
      const request = { ...base(id, newId), kind: 'stop' as const, graceSeconds: graceSeconds ?? instance.stopGraceSeconds }
      return await alreadyAccepted(request) ?? judge('stop', instance) ?? await halt(request, instance)
    },

    async delete (id: string, graceSeconds: number | undefined, newId: NewId): Promise<Accepted> {
      const instance = await existing(id)
      const request = { ...base(id, newId), kind: 'delete' as const, graceSeconds: graceSeconds ?? instance.stopGraceSeconds }
      return await alreadyAccepted(request) ?? judge('delete', instance) ?? await halt(request, instance)
    }
  }
}

/** A migration's named target must be able to take a VMM now; placement checks it again. */
async function checkTargetHost (db: Pool, hostId: string, instance: InstanceView): Promise<void> {
  const host = await placementStatusOf(db, hostId)
  const invalid = (message: string) => new ApiProblem(409, 'Conflict', `body.targetHostId: ${message}`, [{ path: 'body.targetHostId', message }])
  if (host === null) throw new ApiProblem(422, 'Unprocessable Content', `body.targetHostId: host ${hostId} does not exist`, [{ path: 'body.targetHostId', message: `host ${hostId} does not exist` }])
  if (host.status !== 'active') throw invalid(`host ${hostId} is ${host.status}`)
  if (host.cordonedAt !== null) throw invalid(`host ${hostId} is cordoned`)
  if (instance.vmm?.hostId === hostId) throw invalid(`the instance already runs on host ${hostId}`)
}

function conflict (instance: InstanceView, reason: string): ApiProblem {
  const inFlight = instance.operation === null ? '' : `; operation ${instance.operation.id} (${instance.operation.kind}) is in flight`
  return new ApiProblem(409, 'Conflict', `${reason}: instance ${instance.name} is ${instance.state}${inFlight}`)
}

export type InstanceRequests = ReturnType<typeof createInstanceRequests>

declare module 'fastify' {
  interface FastifyInstance {
    instanceRequests: InstanceRequests
  }
}

export default fp<{ defaultStopGraceSeconds: number }>(async (fastify, opts) => {
  fastify.decorate('instanceRequests', createInstanceRequests({
    db: fastify.db,
    temporal: fastify.temporal,
    taskQueue: fastify.temporalConfig.taskQueue,
    repository: fastify.instancesRepository,
    defaultStopGraceSeconds: opts.defaultStopGraceSeconds
  }))
}, { name: 'instance-requests', dependencies: ['database', 'temporal', 'instances-repository'] })
