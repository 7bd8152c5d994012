/**
 * What the fast layer's tests of instance workflows ask of them, as the API and the agents would:
 * requests started or signalled under `instance-<id>` with the options of the contract
 * (contract/workflows.ts `operationStart`, `reportDelivery`), and reports sent as an agent
 * sends them, on a `WorkflowEnvironment` (helpers/workflow-environment.ts) whose world
 * (helpers/workflow-world.ts) plays the activities.
 */
import { randomUUID } from 'node:crypto'
import type { WorkflowHandle, WorkflowHandleWithFirstExecutionRunId, WorkflowHandleWithSignaledRunId } from '@temporalio/client'
import type { CreateRequest, HaltRequest, HandoffRequest, MigrateRequest, NewInstance } from '../../domain/requests.js'
import type { VmmRecord } from '../../domain/vmm.js'
import { haltRequestedSignal } from '../../contract/messages.js'
import { WORKFLOW_TYPES, operationStart, reportDelivery } from '../../contract/workflows.js'
import { startWorkflowEnvironment, type WorkflowEnvironment } from './workflow-environment.js'
import { newInstanceSpec, requestBase, until, type WorkflowWorld } from './workflow-world.js'

/** A workflow environment of the test file's own (call `driver.stop()` in an `after` hook), and its world. */
export async function startInstanceDriver (taskQueue: string): Promise<{ driver: InstanceDriver, world: WorkflowWorld }> {
  const driver = new InstanceDriver(await startWorkflowEnvironment(taskQueue), taskQueue)
  return { driver, world: driver.world }
}

export class InstanceDriver {
  constructor (private readonly env: WorkflowEnvironment, private readonly taskQueue: string) {}

  get world (): WorkflowWorld {
    return this.env.world
  }

  get client (): WorkflowEnvironment['client'] {
    return this.env.client
  }

  async stop (): Promise<void> {
    await this.env.stop()
  }

  /** Whether the world's agents were called `name` for the VMM. */
  called (name: string, vmmId: string): boolean {
    return this.world.calls.some((c) => c.name === name && c.vmmId === vmmId)
  }

  /** Waits until the world's agents are called `name` for the VMM. */
  async callOf (name: string, vmmId: string): Promise<void> {
    await until(`the agent to be called ${name} for ${vmmId}`, () => this.called(name, vmmId))
  }

  /**
   * Creates an instance as the API does (its row, then `createInstance`); one that starts is
   * followed until its VMM is ensured, which is named by the create's operation.
   */
  async create (instance: NewInstance = newInstanceSpec(), start = true): Promise<{ request: CreateRequest, handle: WorkflowHandle, vmmId: string }> {
    const created = await this.startCreate(instance, start)
    if (start) await this.callOf('ensureVmm', created.vmmId)
    return created
  }

  /** Creates an instance as `create` does, not waiting for anything the create does. */
  async startCreate (instance: NewInstance = newInstanceSpec(), start = true): Promise<{ request: CreateRequest, handle: WorkflowHandle, vmmId: string }> {
    const request: CreateRequest = { ...requestBase(randomUUID()), kind: 'create', instance, start }
    this.world.addInstance(request.instanceId, instance)
    const handle = await this.env.client.workflow.start(WORKFLOW_TYPES.create, { ...operationStart(request, { name: instance.name, state: 'creating' }, this.taskQueue), workflowIdConflictPolicy: 'FAIL' })
    return { request, handle, vmmId: `vmm-of-${request.operationId}` }
  }

  /** An instance created and running: its ID. */
  async running (instance: NewInstance = newInstanceSpec()): Promise<string> {
    const { request, handle, vmmId } = await this.create(instance)
    await this.deliver(this.world.vmms.get(vmmId)!, 'running')
    await handle.result()
    return request.instanceId
  }

  /** A report made by the world's agent (`WorkflowWorld.report`), sent as the agent sends it: to the execution it reached. */
  async deliver (...args: Parameters<WorkflowWorld['report']>): Promise<WorkflowHandle> {
    return await this.env.client.workflow.signalWithStart(WORKFLOW_TYPES.reports, reportDelivery(this.world.report(...args), this.taskQueue))
  }

  /** A start, reboot or migrate, started as the API starts it: failing if an execution runs. */
  async request (request: HandoffRequest): Promise<WorkflowHandleWithFirstExecutionRunId> {
    return await this.env.client.workflow.start(WORKFLOW_TYPES[request.kind], { ...operationStart(request, { name: 'i', state: 'running' }, this.taskQueue), workflowIdConflictPolicy: 'FAIL' })
  }

  /** A migration of the running instance, started as the API starts it; `target` is the VMM the migrate names. */
  async migrate (instanceId: string, targetHostId?: string): Promise<{ request: MigrateRequest, handle: WorkflowHandleWithFirstExecutionRunId, source: string, target: string }> {
    const request: MigrateRequest = { ...requestBase(instanceId), kind: 'migrate', ...(targetHostId === undefined ? {} : { targetHostId }) }
    const source = this.world.instances.get(instanceId)!.activeVmmId!
    return { request, handle: await this.request(request), source, target: `vmm-of-${request.operationId}` }
  }

  /** From now on the world's agents answer the ensure of a migration's target with the target ready to receive. */
  targetsReadyWhenEnsured (): void {
    const isTarget = (vmm: VmmRecord): boolean => [...this.world.migrations.values()].some((m) => m.targetVmmId === vmm.id)
    this.world.agent.ensureVmm = (vmm) => vmm.id.startsWith('vmm-of-') && isTarget(vmm)
      ? this.world.report(vmm, 'starting', null, this.world.half(vmm, 'target', 'ready'))
      : this.world.report(vmm, 'starting')
  }

  /** A stop or delete, sent as the API sends it: to whatever execution runs, or a new one. */
  async halt (request: HaltRequest): Promise<WorkflowHandleWithSignaledRunId> {
    return await this.env.client.workflow.signalWithStart(WORKFLOW_TYPES[request.kind], { ...operationStart(request, { name: 'i', state: 'running' }, this.taskQueue), signal: haltRequestedSignal, signalArgs: [request] })
  }

  /** Waits until the operation has the outcome `status`. */
  async ended (operationId: string, status: 'succeeded' | 'failed' = 'succeeded'): Promise<void> {
    await until(`operation ${operationId} ${status}`, () => this.world.operations.get(operationId)?.status === status)
  }
}
