/**
 * The instance workflows, one type per operation, all run under `instance-<id>` (see
 * `execution.ts` for how they share that ID). The type an execution starts as only decides its
 * first operation: any of them takes reports, halts and hand-overs the same way.
 */
import { records } from './activities.js'
import { create } from './create.js'
import type { ApplyReportsInput, CreateRequest, DeleteRequest, HaltRequest, OperationRequest, RebootRequest, StartRequest, StopRequest } from './definitions.js'
import { InstanceExecution, type OperationBodies, type OperationBody } from './execution.js'
import { halt } from './halt.js'
import { reboot } from './reboot.js'
import { start } from './start.js'

const bodies: OperationBodies = {
  create: create as OperationBody,
  start: start as OperationBody,
  reboot: reboot as OperationBody,
  halt
}

async function runOperation (request: OperationRequest, alsoHalts: HaltRequest[] = []): Promise<void> {
  await new InstanceExecution(request.instanceId, bodies, request).run(() => records.loadInstance(request.instanceId), alsoHalts)
}

export async function createInstance (request: CreateRequest): Promise<void> {
  await new InstanceExecution(request.instanceId, bodies, request).run(() => records.ensureInstance(request.instanceId, request.instance))
}

export async function startInstance (request: StartRequest): Promise<void> {
  await runOperation(request)
}

/** `alsoHalts`: stops and deletes that arrived with this one while only reports were applied. */
export async function stopInstance (request: StopRequest, ...alsoHalts: HaltRequest[]): Promise<void> {
  await runOperation(request, alsoHalts)
}

export async function rebootInstance (request: RebootRequest): Promise<void> {
  await runOperation(request)
}

export async function deleteInstance (request: DeleteRequest, ...alsoHalts: HaltRequest[]): Promise<void> {
  await runOperation(request, alsoHalts)
}

/** Started by a host report when no operation is running: applies reports and settles. */
export async function applyVmmReports (input: ApplyReportsInput): Promise<void> {
  await new InstanceExecution(input.instanceId, bodies, null).run(() => records.loadInstance(input.instanceId))
}
