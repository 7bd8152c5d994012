/**
 * The agent's only contact with the control plane: `signalWithStart` to Temporal, for VMM
 * reports (to the instance's workflow ID) and heartbeats (to the host's).
 *
 * The connection is lazy and never awaited at start-up, the SDK's own retries are off (the
 * outbox and the heartbeat retry on their own schedule) and every call has a deadline, so a
 * Temporal that is down or slow costs failed calls, never a blocked agent.
 */
import { Client, Connection } from '@temporalio/client'
import type { HostAnnouncement } from '../../domain/host.js'
import { hostWorkflowId } from '../../domain/ids.js'
import type { VmmReport } from '../../domain/vmm.js'
import { hostHeartbeatSignal } from '../../contract/messages.js'
import { reportDelivery, WORKFLOW_TASK_TIMEOUT, WORKFLOW_TYPES, type MonitorHostInput } from '../../contract/workflows.js'
import { HostIdKey } from '../../contract/search-attributes.js'

const CALL_TIMEOUT_MS = 10_000

export interface TemporalSettings {
  address: string
  namespace: string
  taskQueue: string
}

export class TemporalGateway {
  readonly #connection: Connection
  readonly #client: Client

  constructor (private readonly settings: TemporalSettings) {
    this.#connection = Connection.lazy({ address: settings.address, interceptors: [] })
    this.#client = new Client({ connection: this.#connection, namespace: settings.namespace })
  }

  async sendReport (report: VmmReport): Promise<void> {
    await this.#withDeadline(() => this.#client.workflow.signalWithStart(WORKFLOW_TYPES.reports, reportDelivery(report, this.settings.taskQueue)))
  }

  async sendHeartbeat (announcement: HostAnnouncement): Promise<void> {
    const args: [MonitorHostInput] = [{ hostId: announcement.hostId, lastAnnouncement: null }]
    await this.#withDeadline(() => this.#client.workflow.signalWithStart(WORKFLOW_TYPES.host, {
      workflowId: hostWorkflowId(announcement.hostId),
      taskQueue: this.settings.taskQueue,
      workflowTaskTimeout: WORKFLOW_TASK_TIMEOUT,
      args,
      signal: hostHeartbeatSignal,
      signalArgs: [announcement],
      typedSearchAttributes: [{ key: HostIdKey, value: announcement.hostId }]
    }))
  }

  async close (): Promise<void> {
    await this.#connection.close()
  }

  async #withDeadline (call: () => Promise<unknown>): Promise<void> {
    await this.#connection.withDeadline(Date.now() + CALL_TIMEOUT_MS, call)
  }
}
