/**
 * The instance workflows, one type per operation, all run under `instance-<id>` (see
 * `execution.ts` for how they share that ID). The type an execution starts as only decides its
 * first operation: any of them takes reports, halts and hand-overs the same way.
 */
import type { CreateRequest, DeleteRequest, HaltRequest, MigrateRequest, RebootRequest, StartRequest, StopRequest } from '../domain/requests.js'
import type { ApplyReportsInput } from '../contract/workflows.js'
import { InstanceExecution } from './execution.js'

export async function createInstance (request: CreateRequest): Promise<void> {
  await new InstanceExecution(request.instanceId, request).run(request.instance)
}

export async function startInstance (request: StartRequest): Promise<void> {
  await new InstanceExecution(request.instanceId, request).run()
}

/** `alsoHalts`: stops and deletes that arrived with this one while only reports were taken in. */
export async function stopInstance (request: StopRequest, ...alsoHalts: HaltRequest[]): Promise<void> {
  await new InstanceExecution(request.instanceId, request).run(undefined, alsoHalts)
}

export async function rebootInstance (request: RebootRequest): Promise<void> {
  await new InstanceExecution(request.instanceId, request).run()
}

export async function deleteInstance (request: DeleteRequest, ...alsoHalts: HaltRequest[]): Promise<void> {
  await new InstanceExecution(request.instanceId, request).run(undefined, alsoHalts)
}

/** Live migration to another host (migrate.ts). */
export async function migrateInstance (request: MigrateRequest): Promise<void> {
  await new InstanceExecution(request.instanceId, request).run()
}

/** Started by a host report when no operation is running: takes in reports and settles. */
export async function applyVmmReports (input: ApplyReportsInput): Promise<void> {
  await new InstanceExecution(input.instanceId, null).run()
}
