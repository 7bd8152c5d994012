/**
 * docs/operations.md cannot rot: every ```sh block in it runs here as written, its placeholders
 * filled in, with the real `temporal`, `tctl`, curl and jq against a live stack, each in the
 * situation its section describes, and what it prints must show what the runbook says it does.
 *
 * Each `##` section of the runbook has its steps below, one per command block, in order: what
 * must be true before it runs (`given`) and what its output, or the state it leaves, must show
 * (`check`). A command block without a step here, a step without a block, a placeholder the test
 * does not know, or a fenced block that is neither a command (```sh) nor a sample (```text)
 * fails the test.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { segmentBridgeOf, segmentGroupOf, segmentVxlanOf } from '../../domain/network-segments.js'
import { waitFor, waitUntil } from '../../stack/wait.js'
import { REPO_ROOT } from '../../scripts/tools/paths.js'
import {
  hostOf, runningInstance, runningInstanceAtRest, stuckStopping, vmmProcesses, waitForInstance, waitForState, type InstanceBody
} from '../helpers/instances.js'
import { RECONCILE_ON_DEMAND_ONLY, lastReconcilePass, nextReconcilePass, temporalCli } from '../helpers/operator.js'
import { cutHost, healHost } from '../helpers/partition.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const RUNBOOK = join(REPO_ROOT, 'docs', 'operations.md')
const SETUP_SECTION = 'Before you start'
const PLACEHOLDERS = ['data-dir', 'instance-id', 'host-id', 'operation-id', 'run-id', 'project-id', 'peer-ip'] as const
type Placeholder = typeof PLACEHOLDERS[number]

interface Step {
  /** The block this step is written for: a guard that the runbook and this table line up. */
  command: RegExp
  /** Brings about the situation the block is for, and says what its placeholders stand for. */
  given?: () => Promise<void>
  /** What the output must show; it may also wait for the effect the command is meant to have. */
  check: (output: string) => void | Promise<void>
  /** The block reads something that changes shortly after the previous one: run it again until `check` passes. */
  settles?: boolean
}

/** The runbook's sections and, in each, its ```sh blocks in order. */
function commandBlocks (markdown: string): Map<string, string[]> {
  const sections = new Map<string, string[]>()
  let section: string | null = null
  let fence: { info: string, lines: string[] } | null = null
  for (const [index, line] of markdown.split('\n').entries()) {
    if (fence !== null) {
      if (line.startsWith('```')) {
        if (fence.info === 'sh') {
          if (section === null) throw new Error(`line ${index + 1}: a command block before the first section`)
          sections.get(section)!.push(fence.lines.join('\n'))
        }
        fence = null
      } else {
        fence.lines.push(line)
      }
    } else if (line.startsWith('```')) {
      fence = { info: line.slice(3).trim(), lines: [] }
      if (fence.info !== 'sh' && fence.info !== 'text') throw new Error(`line ${index + 1}: a fenced block is either \`sh\` (a command) or \`text\` (a sample), not \`${fence.info}\``)
    } else if (line.startsWith('## ')) {
      section = line.slice(3).trim()
      sections.set(section, [])
    }
  }
  if (fence !== null) throw new Error('a fenced block is not closed')
  return sections
}

describe('the operator runbook, docs/operations.md', async () => {
  const runbook = commandBlocks(await readFile(RUNBOOK, 'utf8'))
  let stack: TestStack
  /** What the placeholders stand for in the situation at hand; each `given` sets its own. */
  const values: Partial<Record<Placeholder, string>> = {}
  /** The guest another pings in "Is a guest reachable?", and whose firewall rules it then reads. */
  let peer: InstanceBody | null = null
  /** Host agents frozen (SIGSTOP) to make a host lost: resumed at the end whatever happens. */
  const frozen = new Set<string>()
  /** The token the runbook makes for its team's project, and the instance the team creates with it. */
  let teamToken = ''
  let teamInstance = ''
  /**
   * The stack of the section on leases: the runbook's stack keeps none, since its sections freeze
   * agents for minutes (a host keeping a lease fences itself in seconds). Its hosts keep one, and
   * the section's blocks run against it; stopped after the section, or at the end.
   */
  let leaseStack: TestStack | null = null
  /** Hosts of that stack cut off from its LAN, healed after the section (or at the end, should it fail). */
  const cutOff = new Set<string>()

  before(async () => {
    stack = await startStack({
      env: {
        // Reconciler passes only when the runbook triggers one, so each trigger's pass is seen and
        // the schedule counts exactly the three triggers.
        VMPLANE_RECONCILE_SECONDS: RECONCILE_ON_DEMAND_ONLY,
        // A host brought back is heard from within a second.
        VMPLANE_HEARTBEAT_SECONDS: '1'
      }
    })
    values['data-dir'] = stack.dataDir
  })
  after(async () => {
    for (const agent of frozen) await stack.kill(agent, 'SIGCONT')
    if (leaseStack !== null) await backToTheRunbookStack()
    await stack?.stop()
  })

  /** The environment of the runbook's commands: nothing of the test's own Temporal settings. */
  function commandEnv (): NodeJS.ProcessEnv {
    return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('TEMPORAL_')))
  }

  /** Runs a script with bash from the repository's root, as an operator's shell would; fails unless it exits 0. */
  async function sh (script: string): Promise<string> {
    try {
      const { stdout } = await promisify(execFile)('bash', ['-c', `set -euo pipefail\n${script}`], {
        cwd: REPO_ROOT, env: commandEnv(), timeout: 60_000, maxBuffer: 16 * 1024 * 1024
      })
      return stdout
    } catch (error) {
      const { code, stdout, stderr } = error as { code?: number, stdout?: string, stderr?: string }
      throw new Error(`exit ${code}:\n${script}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`)
    }
  }

  function substitute (block: string): string {
    return block.replace(/<([A-Za-z][\w-]*)>/g, (whole, name: string) => {
      assert.ok((PLACEHOLDERS as readonly string[]).includes(name), `unknown placeholder ${whole} in:\n${block}`)
      const value = values[name as Placeholder]
      assert.ok(value !== undefined, `${whole} stands for nothing in this situation:\n${block}`)
      return value
    })
  }

  const prelude = (): string => substitute(runbook.get(SETUP_SECTION)![0]!)

  async function runStep (block: string, step: Step): Promise<void> {
    assert.match(block, step.command, 'the runbook block and the test step disagree')
    await step.given?.()
    const script = `${prelude()}\n${substitute(block)}`
    if (step.settles !== true) {
      const output = await sh(script)
      await step.check(output)
      return
    }
    let last = ''
    await waitFor('the output to show it', async () => {
      const output = await sh(script)
      try {
        await step.check(output)
        return true
      } catch (error) {
        last = `${(error as Error).message}\n${output}`
        return null
      }
    }, { timeoutMs: 30_000, intervalMs: 500, detail: () => last })
  }

  // Situations

  /** The stack's other host (it has two). */
  function otherHost (hostId: string): string {
    return stack.info.hosts.map((h) => h.id).find((id) => id !== hostId)!
  }

  function use (instance: InstanceBody): void {
    values['instance-id'] = instance.id
    values['host-id'] = instance.vmm?.hostId
  }

  /** A running instance whose VMM process is then SIGKILLed: `failed`, as after a crash. */
  async function crashed (name: string): Promise<InstanceBody> {
    const instance = await runningInstance(stack, name)
    for (const pid of await vmmProcesses(stack, instance.vmm!)) process.kill(pid, 'SIGKILL')
    return await waitForState(stack, instance.id, 'failed')
  }

  /** An instance stuck `stopping` on a host whose agent no longer answers (frozen with SIGSTOP). */
  async function stuckOnSilentHost (name: string): Promise<void> {
    const instance = await stuckStopping(stack, name)
    const agent = `agent-${instance.vmm!.hostId}`
    await stack.kill(agent, 'SIGSTOP')
    frozen.add(agent)
    use(instance)
  }

  /** The host's agent answers again and has been heard from, so the VMMs fenced on it are killed. */
  async function hostBack (hostId: string): Promise<void> {
    const agent = `agent-${hostId}`
    const resumedAt = Date.now()
    await stack.kill(agent, 'SIGCONT')
    frozen.delete(agent)
    await waitUntil(`${hostId} heard from again`, async () =>
      Date.parse((await hostOf(stack, hostId))?.lastHeartbeatAt ?? '') > resumedAt, { timeoutMs: 30_000 })
    values['host-id'] = hostId
  }

  /**
   * On a stack of hosts keeping leases (the runbook's blocks now run against it), an instance that
   * stays failed when its host is lost, on a host then cut off until its lease declares it lost
   * (docs/design.md §17).
   */
  async function onHostLostByLease (name: string): Promise<void> {
    const leased = leaseStack = await startStack({ hosts: 3, env: { VMPLANE_HOST_LEASES: '1' } })
    values['data-dir'] = leased.dataDir
    const instance = await runningInstance(leased, name, '', { onHostFailure: 'fail' })
    use(instance)
    const hostId = instance.vmm!.hostId
    await cutHost(leased, hostId, 'link-down')
    cutOff.add(hostId)
    await waitUntil(`${hostId} declared lost by its lease`, async () => {
      const host = await hostOf(leased, hostId) as { status: string, lost: { by: string } | null } | undefined
      return host?.status === 'lost' && host.lost?.by === 'lease'
    }, { timeoutMs: 60_000 })
    await waitForInstance(leased, instance.id, (i) => i.state === 'failed' && i.operation === null, 30_000)
  }

  /** The lease section's stack stopped, its cut healed, and the runbook's own stack in use again. */
  async function backToTheRunbookStack (): Promise<void> {
    for (const hostId of cutOff) await healHost(leaseStack!, hostId)
    cutOff.clear()
    await leaseStack?.stop()
    leaseStack = null
    values['data-dir'] = stack.dataDir
  }

  /** The cut-off host back on its LAN, holding its lease again and active; then the runbook's own stack again. */
  async function healed (hostId: string): Promise<void> {
    const leased = leaseStack!
    await healHost(leased, hostId)
    cutOff.delete(hostId)
    await waitUntil(`${hostId} back, holding its lease`, async () => {
      const host = await hostOf(leased, hostId) as { status: string, lease: { state: string } } | undefined
      return host?.status === 'active' && host.lease.state === 'held'
    }, { timeoutMs: 60_000 })
  }

  async function stoppedBy (code: string): Promise<void> {
    const stopped = await waitForState(stack, values['instance-id']!, 'stopped', 20_000)
    assert.equal(stopped.lastError?.code, code)
  }

  async function hostStatusIs (hostId: string, status: string): Promise<void> {
    await waitUntil(`${hostId} ${status}`, async () => (await hostOf(stack, hostId))?.status === status, { timeoutMs: 30_000 })
  }

  const includesAll = (output: string, ...parts: string[]): void => {
    for (const part of parts) assert.ok(output.includes(part), `${JSON.stringify(part)} is not in:\n${output}`)
  }

  /** tctl's event table wraps long attributes at a fixed width, anywhere in a word: join them up again. */
  const unwrapped = (output: string): string => output.replace(/\s*\n\s*/g, '')

  let previousPass: string | null = null
  /** No pass running, so the trigger is not skipped as an overlap, and the last pass recorded. */
  const beforeTrigger = async (): Promise<void> => {
    await waitUntil('no reconcile pass running', async () =>
      /^Total: 0$/m.test(await temporalCli(stack, 'workflow', 'count', '-q', "WorkflowType = 'reconcile' AND ExecutionStatus = 'Running'")), { timeoutMs: 30_000 })
    previousPass = (await lastReconcilePass(stack))?.id ?? null
  }
  const passRecorded = async (): Promise<void> => { await nextReconcilePass(stack, previousPass) }

  const lostHosts: string[] = []

  const steps: Record<string, Step[]> = {
    [SETUP_SECTION]: [],
    'Readiness: what to wait for': [
      {
        command: /^until curl -sf "\$API\/readyz"[^\n]*\nuntil curl [^\n]*\/v1\/images[^\n]*debian-12\.qcow2/,
        // Both waits end: the API is ready and a host has the image.
        check: (output) => assert.equal(output, '')
      }
    ],
    'What is this instance doing?': [
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq/,
        given: async () => { use(await stuckStopping(stack, 'runbook-doing')) },
        check: (output) => includesAll(output, values['instance-id']!, '"state": "stopping"', '"kind": "stop"', values['host-id']!)
      },
      {
        command: /^temporal workflow query -w instance-<instance-id> --name state$/,
        check: (output) => includesAll(output, 'Query result:', '"operation":"stop"', '"phase":"stopping"', '"stopDeadline"', values['host-id']!)
      },
      {
        command: /^tctl workflow query -w instance-<instance-id> --qt state$/,
        check: (output) => includesAll(output, 'Query result:', '"operation":"stop"', '"phase":"stopping"', '"stopDeadline"', values['host-id']!)
      },
      {
        command: /^temporal workflow describe -w instance-<instance-id>$/,
        check: (output) => includesAll(output, 'stopInstance', 'StaticSummary  "stop runbook-doing (grace 600 s)"', 'InstanceState', '"\\"stopping\\""')
      },
      {
        command: /^tctl workflow describe -w instance-<instance-id>$/,
        check: (output) => includesAll(output, '"name": "stopInstance"', '"status": "Running"', '"InstanceState": "stopping"')
      }
    ],
    'Why did it fail?': [
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq/,
        given: async () => { use(await crashed('runbook-crashed')) },
        check: (output) => includesAll(output, '"state": "failed"', '"code": "VmmCrashed"', 'SIGKILL')
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id>\/events.* \| jq/,
        check: (output) => includesAll(output, 'failed', 'SIGKILL')
      },
      {
        command: /^temporal workflow show -w instance-<instance-id> --detailed$/,
        check: (output) => includesAll(output, 'signalName: vmmReport', 'input[0].exit.signal: SIGKILL')
      },
      {
        command: /^tctl workflow show -w instance-<instance-id>$/,
        check: (output) => includesAll(unwrapped(output), 'SignalName:vmmReport', '"signal":"SIGKILL"')
      }
    ],
    'Everything stuck in stopping': [
      {
        command: /curl .*\/v1\/instances\?state=stopping/,
        given: async () => { use(await stuckStopping(stack, 'runbook-stuck')) },
        check: (output) => includesAll(output, values['instance-id']!, 'runbook-stuck')
      },
      {
        command: /^temporal workflow list -q "InstanceState = 'stopping' AND ExecutionStatus = 'Running'"$/,
        settles: true,
        check: (output) => includesAll(output, `instance-${values['instance-id']!}`, 'stopInstance')
      },
      {
        command: /^tctl workflow list -q "InstanceState = 'stopping' AND ExecutionStatus = 'Running'" --psa$/,
        settles: true,
        check: (output) => includesAll(output, `instance-${values['instance-id']!}`, 'stopInstance', 'stopping')
      }
    ],
    'Force a stop now': [
      {
        command: /^temporal workflow signal -w instance-<instance-id> --name forceStop --input/,
        given: async () => { use(await stuckStopping(stack, 'runbook-forced-temporal')) },
        check: async (output) => {
          includesAll(output, 'Signal workflow succeeded')
          await stoppedBy('StopForced')
        }
      },
      {
        command: /^tctl workflow signal -w instance-<instance-id> -n forceStop -i/,
        given: async () => { use(await stuckStopping(stack, 'runbook-forced-tctl')) },
        check: async (output) => {
          includesAll(output, 'Signal workflow succeeded')
          await stoppedBy('StopForced')
        }
      },
      {
        command: /^temporal workflow signal-with-start -w instance-<instance-id> --type applyVmmReports .*--signal-name forceStop/s,
        // Running, with no operation in flight: no execution runs for it.
        given: async () => { use(await runningInstance(stack, 'runbook-forced-idle', 'sim.ignore_power_button')) },
        check: async (output) => {
          includesAll(output, 'Running execution:', `instance-${values['instance-id']!}`, 'applyVmmReports')
          await stoppedBy('StopForced')
          // Started by hand, it still carries InstanceId, so a search for the instance finds it.
          const found = await temporalCli(stack, 'workflow', 'list', '-q', `InstanceId = '${values['instance-id']!}' AND WorkflowType = 'applyVmmReports'`)
          includesAll(found, `instance-${values['instance-id']!}`)
        }
      },
      {
        command: /curl .* -X POST \$API\/v1\/instances\/<instance-id>\/stop .*"graceSeconds": ?0/,
        given: async () => { use(await stuckStopping(stack, 'runbook-forced-api')) },
        check: async (output) => {
          includesAll(output, '"kind": "stop"', values['instance-id']!)
          await stoppedBy('StopForced')
        }
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq/,
        check: (output) => includesAll(output, '"state": "stopped"', '"code": "StopForced"')
      }
    ],
    'Declare a host lost': [
      {
        command: /^temporal workflow signal -w host-<host-id> --name declareHostLost/,
        given: async () => { await stuckOnSilentHost('runbook-lost-temporal') },
        check: async (output) => {
          includesAll(output, 'Signal workflow succeeded')
          lostHosts.push(values['host-id']!)
          await hostStatusIs(values['host-id']!, 'lost')
          await stoppedBy('HostLost')
        }
      },
      {
        command: /^tctl workflow signal -w host-<host-id> -n declareHostLost/,
        // The first host is lost now: this instance lands on the other one.
        given: async () => { await stuckOnSilentHost('runbook-lost-tctl') },
        check: async (output) => {
          includesAll(output, 'Signal workflow succeeded')
          assert.ok(!lostHosts.includes(values['host-id']!))
          lostHosts.push(values['host-id']!)
          await hostStatusIs(values['host-id']!, 'lost')
          await stoppedBy('HostLost')
        }
      },
      {
        command: /curl .*\/v1\/hosts \| jq/,
        check: (output) => {
          for (const host of lostHosts) assert.match(output, new RegExp(`"id": "${host}",\\s*"status": "lost"`))
        }
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq/,
        check: (output) => includesAll(output, '"state": "stopped"', '"code": "HostLost"', '"state": "lost"')
      },
      {
        command: /^temporal workflow signal -w host-<host-id> --name readmitHost$/,
        given: async () => { await hostBack(lostHosts[0]!) },
        check: async (output) => {
          includesAll(output, 'Signal workflow succeeded')
          await hostStatusIs(lostHosts[0]!, 'active')
        }
      },
      {
        command: /^tctl workflow signal -w host-<host-id> -n readmitHost$/,
        given: async () => { await hostBack(lostHosts[1]!) },
        check: async (output) => {
          includesAll(output, 'Signal workflow succeeded')
          await hostStatusIs(lostHosts[1]!, 'active')
        }
      },
      {
        command: /curl .*\/v1\/hosts \| jq/,
        check: (output) => {
          for (const host of lostHosts) assert.match(output, new RegExp(`"id": "${host}",\\s*"status": "active"`))
        }
      }
    ],
    'A host lost by itself: its lease': [
      {
        command: /curl .*\/v1\/hosts \| jq '\.items\[\] \| \{id, status, lease, lost\}'/,
        given: async () => { await onHostLostByLease('runbook-lease') },
        check: (output) => {
          assert.match(output, new RegExp(`"id": "${values['host-id']!}",\\s*"status": "lost",\\s*"lease": \\{\\s*"state": "fenced"`))
          includesAll(output, '"by": "lease"', 'lease lapsed: last granted', 'the host surely fenced by', '"state": "held"')
        }
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq '\{state, onHostFailure, lastError\}'/,
        check: async (output) => {
          includesAll(output, '"state": "failed"', '"onHostFailure": "fail"', '"code": "HostLost"', 'the host surely fenced by')
          await healed(values['host-id']!)
        }
      }
    ],
    'Trigger a reconcile': [
      {
        command: /^temporal schedule trigger --schedule-id vmplane-reconciler$/,
        given: beforeTrigger,
        check: async (output) => {
          includesAll(output, 'Trigger request sent')
          await passRecorded()
        }
      },
      {
        command: /^tctl schedule trigger --sid vmplane-reconciler$/,
        given: beforeTrigger,
        check: async (output) => {
          includesAll(output, 'Trigger request sent')
          await passRecorded()
        }
      },
      {
        command: /curl .* -X POST \$API\/v1\/admin\/reconcile/,
        given: beforeTrigger,
        check: async (output) => {
          includesAll(output, '"triggered": true')
          await passRecorded()
        }
      },
      {
        command: /curl .*\/v1\/admin\/reconcile\?limit=1/,
        check: (output) => includesAll(output, '"hostsChecked": 2', '"finishedAt"')
      },
      {
        command: /^temporal schedule describe --schedule-id vmplane-reconciler$/,
        check: (output) => includesAll(output, 'vmplane-reconciler', 'OverlapPolicy     Skip', '"Total":3')
      }
    ],
    "An operation's full history": [
      {
        command: /curl .*\/v1\/operations\/<operation-id> \| jq/,
        given: async () => {
          // The history shown is the stop's own execution's.
          const instance = await runningInstanceAtRest(stack, 'runbook-history')
          const stop = await api(stack).post<{ operation: { id: string } }>(`/v1/instances/${instance.id}/stop`, { graceSeconds: 10 })
          assert.equal(stop.status, 202)
          await waitForState(stack, instance.id, 'stopped')
          use(instance)
          values['operation-id'] = stop.body.operation.id
          values['run-id'] = (await api(stack).get<{ runId: string }>(`/v1/operations/${stop.body.operation.id}`)).body.runId
        },
        check: (output) => includesAll(output, '"status": "succeeded"', `"workflowId": "instance-${values['instance-id']!}"`, values['run-id']!)
      },
      {
        command: /^temporal workflow list -q "InstanceId = '<instance-id>'"$/,
        settles: true,
        check: (output) => includesAll(output, 'createInstance', 'stopInstance', 'Completed')
      },
      {
        command: /^temporal workflow show -w instance-<instance-id> -r <run-id>$/,
        check: (output) => includesAll(output, 'WorkflowExecutionStarted', 'ActivityTaskCompleted', 'WorkflowExecutionCompleted', 'Status          COMPLETED')
      },
      {
        command: /^tctl workflow show -w instance-<instance-id> -r <run-id>$/,
        check: (output) => includesAll(unwrapped(output), 'WorkflowType:{Name:stopInstance}', `"operationId":"${values['operation-id']!}"`, 'SignalName:haltRequested', 'WorkflowExecutionCompleted')
      }
    ],
    'Replay a workflow': [
      {
        command: /temporal workflow show -w instance-<instance-id> -o json > \/tmp\/instance-<instance-id>\.json\nnode dist\/scripts\/replay\.js \/tmp\/instance-<instance-id>\.json/,
        check: async (output) => {
          await rm(`/tmp/instance-${values['instance-id']!}.json`)
          includesAll(output, 'stopInstance', 'replays deterministically')
        }
      }
    ],
    'Run an execution again': [
      {
        command: /^temporal workflow reset -w instance-<instance-id> -r <run-id> --type FirstWorkflowTask --reason "run the stop again"$/,
        check: async (output) => {
          includesAll(output, `Resetting workflow instance-${values['instance-id']!}`)
          await waitUntil('the reset run to end', async () => {
            const described = JSON.parse(await temporalCli(stack, 'workflow', 'describe', '-w', `instance-${values['instance-id']!}`, '-o', 'json'))
            const run = described.workflowExecutionInfo
            return run.execution.runId !== values['run-id'] && run.status === 'WORKFLOW_EXECUTION_STATUS_COMPLETED'
          }, { timeoutMs: 30_000 })
        }
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id>\/events \| jq -r/,
        check: async (output) => {
          // Each decision of the stop is recorded once: the reset run made none of them again.
          const lines = output.trim().split('\n')
          assert.equal(lines[0], 'operation-finished  stopped  stop done')
          assert.equal(lines.filter((line) => line.includes('stop requested')).length, 1, output)
          assert.equal(lines.filter((line) => line.startsWith('state-changed  stopped')).length, 1, output)
          const { body: operation } = await api(stack).get<{ status: string, runId: string }>(`/v1/operations/${values['operation-id']!}`)
          assert.deepEqual([operation.status, operation.runId], ['succeeded', values['run-id']])
        }
      }
    ],
    "An instance's disks, address and console": [
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq '\{disks, interfaces, cloudInit\}'$/,
        given: async () => { use(await runningInstance(stack, 'runbook-disks')) },
        check: (output) => includesAll(output, '"location": "disks/', '"state": "ready"', '"image": "debian-12.qcow2"', '"tap": "vmp', '"network": {')
      },
      {
        command: /^qemu-img info -U /,
        check: (output) => includesAll(output, 'file format: qcow2', 'virtual size: 2 GiB', `backing file: ${stack.dataDir}/storage/images/`)
      },
      {
        command: /^ip -n .* link show type tun$/,
        check: async (output) => {
          const { body } = await api(stack).get<{ interfaces: Array<{ tap: string, network: { name: string } }> }>(`/v1/instances/${values['instance-id']!}`)
          const { body: network } = await api(stack).get<{ vni: number }>(`/v1/networks/${body.interfaces[0]!.network.name}`)
          includesAll(output, `${body.interfaces[0]!.tap}:`, 'mtu 1500', `master ${segmentBridgeOf(network.vni)}`, 'UP')
        }
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id>\/console\/log\?bytes=1024"$/,
        settles: true,
        check: (output) => includesAll(output, 'cloud-init: hostname set to runbook-disks', 'runbook-disks login: ')
      }
    ],
    'Is a guest reachable?': [
      {
        command: /^\(printf 'ping <peer-ip> 3\\r'; sleep 3\) \| VMPLANE_DATA_DIR=\$DATA node dist\/bin\/vmplane\.js instances console <instance-id> \| grep -a sim\.ping$/,
        given: async () => {
          peer = await runningInstance(stack, 'runbook-peer')
          const { body } = await api(stack).get<{ interfaces: Array<{ ip: string }> }>(`/v1/instances/${peer.id}`)
          values['peer-ip'] = body.interfaces[0]!.ip
          use(await runningInstance(stack, 'runbook-prober'))
        },
        check: (output) => { assert.match(output, new RegExp(`^sim\\.ping ${values['peer-ip']!.replaceAll('.', '\\.')}: 3/3 replies, longest gap \\d+ ms`, 'm')) }
      },
      {
        command: /^bridge -n .* fdb show \| grep -a 'dst'$/,
        check: async (output) => {
          const { body: network } = await api(stack).get<{ vni: number }>('/v1/networks/default')
          includesAll(output, `00:00:00:00:00:00 dev ${segmentVxlanOf(network.vni)} dst ${segmentGroupOf(network.vni)} via eth0 self permanent`)
        }
      },
      {
        command: /^curl -s "\$\{auth\[@\]\}" \$API\/v1\/firewall-rules \| jq -c /,
        given: async () => {
          const made = await api(stack).post('/v1/firewall-rules', { target: { instance: 'runbook-peer' }, protocol: 'tcp', ports: { from: 8080, to: 8080 }, peer: { cidr: '198.18.0.0/15' } })
          assert.equal(made.status, 201, JSON.stringify(made.body))
        },
        check: (output) => includesAll(output, '"name":"runbook-peer"', '"direction":"ingress"', '"ports":{"from":8080,"to":8080}', '"peer":{"cidr":"198.18.0.0/15"}')
      },
      {
        command: /^ip netns exec .* nft list table inet vmplane \| grep -a -A4 'chain in_'$/,
        given: async () => { use(peer!) },
        settles: true,
        check: (output) => includesAll(output, 'chain in_vmp', 'ip saddr 198.18.0.0/15 tcp dport 8080 accept', 'drop')
      }
    ],
    'Migrate an instance, cancel a migration, drain a host': [
      {
        command: /curl -s -X POST .*\/migrate\?wait=60" \| jq /,
        given: async () => { use(await runningInstance(stack, 'runbook-migrate')) },
        check: (output) => includesAll(output, '"state": "running"', '"outcome": "succeeded"', `"host": "${otherHost(values['host-id']!)}"`)
      },
      {
        command: /curl .*\/v1\/instances\/<instance-id> \| jq '\{state, migration: /,
        given: async () => {
          // A migration slow enough to be seen under way: about 4 s of precopy.
          const instance = await runningInstance(stack, 'runbook-migrating', 'sim.migration_mib_per_s=64 sim.migration_dirty_mib_per_s=8')
          use(instance)
          const accepted = await api(stack).post(`/v1/instances/${instance.id}/migrate`)
          assert.equal(accepted.status, 202, JSON.stringify(accepted.body))
          await waitForInstance(stack, instance.id, (i) => (i.migration as { phase: string } | null)?.phase === 'sending')
        },
        check: (output) => includesAll(output, '"state": "migrating"', '"phase": "sending"', '"memoryIterations"', `"hostId": "${values['host-id']!}"`)
      },
      {
        command: /\/migrate\/cancel\?wait=30" \| jq /,
        check: (output) => includesAll(output, '"state": "running"', '"error": "MigrationCancelled"', `"host": "${values['host-id']!}"`)
      },
      {
        command: /\/v1\/hosts\/<host-id>\/drain .* \| jq /,
        given: async () => { use(await runningInstance(stack, 'runbook-drained')) },
        check: (output) => {
          includesAll(output, `"id": "${values['host-id']!}"`, '"cordonedAt": "')
          assert.match(output, /"drain": "(draining|drained)"/)
        }
      },
      {
        command: /curl -s "\$\{auth\[@\]\}" \$API\/v1\/hosts \| jq /,
        settles: true,
        // Earlier sections leave instances on the host that do not run (one stuck stopping for
        // 600 s), which the drain waits for: what shows here is the migrations it made.
        check: (output) => {
          includesAll(output, '"failed": 0')
          assert.match(output, /"migrated": [1-9]/)
        }
      },
      {
        command: /\/v1\/hosts\/<host-id>\/uncordon \| jq /,
        check: async (output) => {
          includesAll(output, '"cordonedAt": null')
          const instance = await waitForState(stack, values['instance-id']!, 'running')
          assert.notEqual(instance.vmm?.hostId, values['host-id'], 'the drained host\'s instance runs elsewhere')
        }
      }
    ],
    'A team\'s project: its quotas, its tokens, its operations and who did what': [
      {
        command: /-X POST \$API\/v1\/projects -d '\{"name": "team-a"\}' \| jq /,
        check: (output) => {
          includesAll(output, '"name": "team-a"')
          values['project-id'] = (JSON.parse(output) as { id: string }).id
        }
      },
      {
        command: /-X PUT \$API\/v1\/projects\/team-a\/quotas /,
        check: (output) => includesAll(output, '{"vcpus":8,"memoryMiB":null,"diskGiB":null,"instances":4,"addresses":null}', '{"vcpus":0,"memoryMiB":0,"diskGiB":0,"instances":0,"addresses":0}')
      },
      {
        command: /-X POST \$API\/v1\/projects\/team-a\/tokens .* \| jq -r '\.role, \.expiresAt, \.token'/,
        check: (output) => {
          const [role, , token] = output.trim().split('\n')
          assert.equal(role, 'collaborator')
          assert.match(token ?? '', /^vmp_[0-9a-f]{32}_/)
          teamToken = token!
        }
      },
      {
        command: /^temporal workflow list -q "Project = '<project-id>'"$/,
        // The team, with its new token, creates an instance in its project.
        given: async () => {
          const created = await api({ apiUrl: stack.info.apiUrl, apiToken: teamToken }).post('/v1/projects/team-a/instances', { name: 'team-a-web', vcpus: 1, memoryMiB: 128, boot: { kernel: 'vmlinux', initramfs: 'initrd.img' } })
          assert.equal(created.status, 202, JSON.stringify(created.body))
          teamInstance = created.body.instance.id
        },
        check: (output) => includesAll(output, `instance-${teamInstance}`, 'createInstance')
      },
      {
        command: /\/v1\/projects\/team-a\/audit\?limit=5/,
        check: (output) => includesAll(output, 'team-a-ci  POST /v1/projects/team-a/instances  202', 'VMPLANE_API_TOKEN  POST /v1/projects/team-a/tokens  201', 'VMPLANE_API_TOKEN  PUT /v1/projects/team-a/quotas  200')
      }
    ]
  }

  it('has a step for every command block and a command block for every step', () => {
    assert.deepEqual([...runbook.keys()], Object.keys(steps), 'the sections of the runbook')
    assert.equal(runbook.get(SETUP_SECTION)!.length, 1, `"${SETUP_SECTION}" is one block, which every other block runs after`)
    for (const [section, blocks] of runbook) {
      if (section === SETUP_SECTION) continue
      assert.equal(blocks.length, steps[section]!.length, `"${section}" has ${blocks.length} command blocks; the test knows ${steps[section]!.length}`)
    }
  })

  it(`"${SETUP_SECTION}" points temporal, tctl and curl at this stack`, async () => {
    const output = await sh(`${prelude()}\nprintf '%s\\n' "$TEMPORAL_ADDRESS" "$TEMPORAL_CLI_ADDRESS" "$API"`)
    assert.deepEqual(output.split('\n'), [stack.info.temporalAddress, stack.info.temporalAddress, stack.info.apiUrl, ''])
  })

  for (const [section, blocks] of runbook) {
    if (section === SETUP_SECTION) continue
    it(section, async () => {
      const sectionSteps = steps[section]
      assert.ok(sectionSteps !== undefined && sectionSteps.length === blocks.length, `"${section}" has no step for every block`)
      try {
        for (const [index, block] of blocks.entries()) await runStep(block, sectionSteps[index]!)
      } finally {
        // A section that failed half-way on the lease's stack leaves the next on the runbook's own.
        if (leaseStack !== null) await backToTheRunbookStack()
      }
    })
  }
})
