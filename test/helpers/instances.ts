/**
 * Helpers for tests that drive instances through a stack's HTTP API.
 */
import { join } from 'node:path'
import { STAND_IN_BASE_IMAGE } from '../../stack/hypervisor.js'
import { findVmmProcesses } from '../../stack/processes.js'
import { waitFor, waitUntil } from '../../stack/wait.js'
import { temporalCli } from './operator.js'
import { api, type TestStack } from './stack.js'

export interface InstanceBody {
  id: string
  name: string
  state: string
  intendedState: string
  vmm: { id: string, hostId: string, state: string, reason: string | null, exit: unknown } | null
  operation: { id: string, kind: string, status: string } | null
  lastError: { code: string, message: string } | null
  conditions: Array<{ type: string, since: string, message: string }>
  [key: string]: unknown
}

/**
 * A body for POST /v1/instances that boots on a simulated host as a real VM would be made: a
 * boot disk from the stand-in base image, a data disk, and (by default) an interface on the
 * stack's default network, so every test's VMMs have disks, a seed and a TAP. `cmdline` carries
 * sim.* directives.
 */
export function newInstance (name: string, cmdline = 'console=ttyS0') {
  return {
    name,
    vcpus: 1,
    memoryMiB: 256,
    boot: { kernel: 'vmlinux', initramfs: 'initrd.img', cmdline },
    bootDisk: { image: STAND_IN_BASE_IMAGE },
    dataDisks: [{ name: 'data', sizeGiB: 1 }]
  }
}

/** Polls the instance (of the project at `projectPath`) until `accept` says yes; fails with the last state seen. */
export async function waitForInstance (
  stack: TestStack,
  id: string,
  accept: (instance: InstanceBody) => boolean,
  timeoutMs = 60_000,
  projectPath = '/v1/projects/default'
): Promise<InstanceBody> {
  let last: InstanceBody | null = null
  return await waitFor(`instance ${id} to reach the expected state`, async () => {
    const { status, body } = await api(stack).get<InstanceBody>(`${projectPath}/instances/${id}`)
    if (status !== 200) throw new Error(`GET ${projectPath}/instances/${id} answered ${status}`)
    last = body
    return accept(body) ? body : null
  }, { timeoutMs, intervalMs: 100, detail: () => `last seen: ${JSON.stringify(last)}` })
}

export async function waitForState (stack: TestStack, id: string, state: string, timeoutMs?: number, projectPath?: string): Promise<InstanceBody> {
  return await waitForInstance(stack, id, (i) => i.state === state && i.operation === null, timeoutMs, projectPath)
}

/** What makes `newInstance` an instance without disks: booted from its kernel and initramfs alone. */
export const DISKLESS = { bootDisk: undefined, dataDisks: [] }

/** The live processes of one VMM, found by its API socket inside its host's state directory. */
export async function vmmProcesses (stack: TestStack, vmm: { id: string, hostId: string }): Promise<number[]> {
  const host = stack.info.hosts.find((h) => h.id === vmm.hostId)
  if (host === undefined) throw new Error(`the stack has no host ${vmm.hostId}`)
  return await findVmmProcesses(join(host.stateDir, 'vmms', vmm.id))
}

export interface EventBody {
  kind: string
  state: string | null
  message: string
  details: Record<string, unknown> | null
}

/** The instance's events, oldest first (the API answers newest first). */
export async function eventsOf (stack: TestStack, id: string): Promise<EventBody[]> {
  const { body } = await api(stack).get<{ items: EventBody[] }>(`/v1/instances/${id}/events?limit=500`)
  return body.items.reverse()
}

/** Creates an instance with these simulator directives (and `body`'s fields) and waits until it runs. */
export async function runningInstance (stack: TestStack, name: string, cmdline = '', body: Record<string, unknown> = {}): Promise<InstanceBody> {
  const created = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', { ...newInstance(name, cmdline), ...body })
  if (created.status !== 202) throw new Error(`POST /v1/instances answered ${created.status}: ${JSON.stringify(created.body)}`)
  return await waitForState(stack, created.body.instance.id, 'running')
}

/**
 * `runningInstance`, and then its create's execution ended. That execution records `running` a
 * moment before it ends, and a stop arriving in that moment is served by it rather than by a
 * stopInstance execution of its own: for callers that look for the latter in Temporal.
 */
export async function runningInstanceAtRest (stack: TestStack, name: string, cmdline = ''): Promise<InstanceBody> {
  const instance = await runningInstance(stack, name, cmdline)
  await waitUntil(`the create of ${name} to end`, async () => {
    const described = JSON.parse(await temporalCli(stack, 'workflow', 'describe', '-w', `instance-${instance.id}`, '-o', 'json'))
    return described.workflowExecutionInfo?.status !== 'WORKFLOW_EXECUTION_STATUS_RUNNING'
  }, { timeoutMs: 30_000 })
  return instance
}

/** An instance whose guest ignores the power button, in a stop with a long grace period: stuck `stopping`. */
export async function stuckStopping (stack: TestStack, name: string): Promise<InstanceBody> {
  const instance = await runningInstanceAtRest(stack, name, 'sim.ignore_power_button')
  const stop = await api(stack).post(`/v1/instances/${instance.id}/stop`, { graceSeconds: 600 })
  if (stop.status !== 202) throw new Error(`POST /v1/instances/${instance.id}/stop answered ${stop.status}: ${JSON.stringify(stop.body)}`)
  return await waitForInstance(stack, instance.id, (i) => i.state === 'stopping' && i.vmm?.state === 'stopping')
}

export interface HostBody {
  id: string
  status: string
  lastHeartbeatAt: string | null
  [key: string]: unknown
}

/** A host as GET /v1/hosts shows it. */
export async function hostOf (stack: TestStack, hostId: string): Promise<HostBody | undefined> {
  return (await api(stack).get<{ items: HostBody[] }>('/v1/hosts')).body.items.find((h) => h.id === hostId)
}
