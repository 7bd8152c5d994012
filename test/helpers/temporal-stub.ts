/**
 * A stand-in for the API's Temporal client, for `inject` tests of what the API accepts
 * (helpers/api-server.ts `temporal: 'stub'`): it records every start, signal and trigger the API
 * sends, and answers as Temporal's server would, holding each workflow ID it started as running.
 * A start under a held ID with the conflict policy `FAIL` is refused as Temporal refuses it, so
 * the API's hand-over and conflict paths run; `USE_EXISTING` takes the held run. A test plays the
 * workflows' part by writing PostgreSQL's rows itself (an execution ending: `release`).
 *
 * The stub is installed on the very client the API's plugins hold (api/plugins/temporal.ts
 * decorates the app with it, and every service keeps that object), so nothing in the API is
 * changed for it.
 */
import { randomUUID } from 'node:crypto'
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client'

/** One call the API made to Temporal. */
export interface TemporalCall {
  call: 'start' | 'signalWithStart' | 'signal' | 'describe' | 'trigger'
  /** The workflow ID, or the schedule's for a trigger. */
  id: string
  workflowType?: string
  signal?: string
  args: unknown[]
  options?: Record<string, unknown>
}

type Named = string | { name: string }

function nameOf (definition: Named): string {
  return typeof definition === 'string' ? definition : definition.name
}

export class TemporalStub {
  readonly calls: TemporalCall[] = []
  /** The workflow IDs an execution holds, with its run ID. */
  private readonly running = new Map<string, string>()
  private readonly installed = new WeakSet<Client>()

  /** Makes `client` answer through this stub (once: it is asked again with every request). */
  install (client: Client | undefined): void {
    if (client === undefined || this.installed.has(client)) return
    this.installed.add(client)
    Object.assign(client.workflow, {
      start: async (workflowType: string, options: Record<string, unknown> & { workflowId: string, args?: unknown[] }) => await this.start(workflowType, options),
      signalWithStart: async (workflowType: string, options: Record<string, unknown> & { workflowId: string, signal: Named, signalArgs?: unknown[], args?: unknown[] }) =>
        this.signalWithStart(workflowType, options),
      getHandle: (workflowId: string) => this.handle(workflowId)
    })
    Object.assign(client.schedule, {
      getHandle: (scheduleId: string) => ({
        trigger: async () => { this.calls.push({ call: 'trigger', id: scheduleId, args: [] }) }
      })
    })
    // `workflowService` is a getter of the client's prototype: an own property shadows it. A
    // worker polls the task queue, as `/readyz` asks.
    Object.defineProperty(client, 'workflowService', {
      value: {
        describeTaskQueue: async () => ({ pollers: [{ lastAccessTime: { seconds: Math.floor(Date.now() / 1000) } }] })
      }
    })
  }

  /** The calls made under `id` (a workflow's, or a schedule's). */
  callsOf (id: string): TemporalCall[] {
    return this.calls.filter((c) => c.id === id)
  }

  /** The run of the execution that holds `workflowId`, if one does. */
  runOf (workflowId: string): string | undefined {
    return this.running.get(workflowId)
  }

  /** An execution another client started under `workflowId` (an agent's report, say): its run. */
  startedElsewhere (workflowId: string): string {
    return this.running.get(workflowId) ?? this.hold(workflowId)
  }

  /** The execution holding `workflowId` ends, as a workflow that finished its work does. */
  release (workflowId: string): void {
    this.running.delete(workflowId)
  }

  private async start (workflowType: string, options: Record<string, unknown> & { workflowId: string, args?: unknown[] }) {
    const { workflowId } = options
    this.calls.push({ call: 'start', id: workflowId, workflowType, args: options.args ?? [], options })
    const held = this.running.get(workflowId)
    if (held !== undefined && options.workflowIdConflictPolicy !== 'USE_EXISTING') {
      throw new WorkflowExecutionAlreadyStartedError('Workflow execution already started', workflowId, workflowType)
    }
    const runId = held ?? this.hold(workflowId)
    return { workflowId, firstExecutionRunId: runId }
  }

  private signalWithStart (workflowType: string, options: Record<string, unknown> & { workflowId: string, signal: Named, signalArgs?: unknown[], args?: unknown[] }) {
    const { workflowId } = options
    this.calls.push({ call: 'signalWithStart', id: workflowId, workflowType, signal: nameOf(options.signal), args: options.signalArgs ?? [], options })
    return { workflowId, signaledRunId: this.running.get(workflowId) ?? this.hold(workflowId) }
  }

  private handle (workflowId: string) {
    // Each call is recorded as sent, then answered as Temporal would: not found, with no execution.
    const held = (): string => {
      const runId = this.running.get(workflowId)
      if (runId === undefined) throw new WorkflowNotFoundError(`workflow ${workflowId} is not running`, workflowId, undefined)
      return runId
    }
    return {
      workflowId,
      signal: async (definition: Named, ...args: unknown[]) => {
        this.calls.push({ call: 'signal', id: workflowId, signal: nameOf(definition), args })
        held()
      },
      describe: async () => {
        this.calls.push({ call: 'describe', id: workflowId, args: [] })
        return { workflowId, runId: held() }
      }
    }
  }

  private hold (workflowId: string): string {
    const runId = randomUUID()
    this.running.set(workflowId, runId)
    return runId
  }
}
