/**
 * `npm run bench:agent [-- --vmms N]`: one host agent managing N (200) simulated VMMs.
 *
 * Starts its own stack with one host, then drives the agent's HTTP API directly: boot N VMMs,
 * let them idle, stop them all with the power button, destroy them. Measures the agent process
 * (CPU as % of one core, peak RSS) at idle with no VMM, while all boot, idle with all running,
 * and while all stop; and the report lag — from the moment the agent observed a change to the
 * moment Temporal accepted its report — read from the signal events in the instance workflows'
 * histories. Prints a table and writes bench/results/agent-<time>.json.
 */
import { randomUUID } from 'node:crypto'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { Client, Connection } from '@temporalio/client'
import { defaultPayloadConverter } from '@temporalio/common'
import { HostAgentClient } from '../http/host-agent-client.js'
import { instanceWorkflowId } from '../domain/ids.js'
import type { VmmReport } from '../domain/vmm.js'
import { launchStack } from '../test/helpers/launcher.js'
import { waitFor } from '../stack/wait.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import { ensureTemporalTools } from '../scripts/tools/temporal-tools.js'
import { describeMachine } from './machine.js'
import { measure, type PhaseFigures } from './process-sampler.js'
import { percentile, round } from './stats.js'

const { values } = parseArgs({ options: { vmms: { type: 'string', default: '200' } } })
const VMMS = Number(values.vmms)
const IDLE_SECONDS = 10
const CONCURRENCY = 20

/** Runs `work` on every item, at most CONCURRENCY at a time. */
async function eachLimited<T> (items: T[], work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < items.length) await work(items[next++])
  }))
}

const { temporal } = await ensureTemporalTools({ temporalCli: process.env.TEMPORAL_CLI ?? null, log: console.log })
console.log(`starting a stack with one host for ${VMMS} VMMs`)
const stack = await launchStack({
  outputDir: join(REPO_ROOT, 'test-output', 'bench'),
  hosts: 1,
  env: { VMPLANE_HOST_VCPUS: String(VMMS * 2), VMPLANE_HOST_MEMORY_MIB: String(VMMS * 512) }
})
try {
  const host = stack.info.hosts[0]
  const agentPid = await stack.pid(`agent-${host.id}`)
  const agent = new HostAgentClient({ token: stack.info.agentToken, timeoutMs: 30_000 })
  const vmms = Array.from({ length: VMMS }, () => ({ id: randomUUID(), instanceId: randomUUID() }))

  async function allIn (state: string): Promise<void> {
    await waitFor(`${VMMS} VMMs ${state}`, async () => {
      const states = (await agent.listVmms(host.url)).filter((v) => v.state === state)
      return states.length >= VMMS ? true : null
    }, { timeoutMs: 300_000, intervalMs: 250 })
  }

  console.log('measuring the idle agent')
  const idle = (await measure(agentPid, () => sleep(IDLE_SECONDS * 1000))).figures

  console.log(`booting ${VMMS} VMMs`)
  const boot = (await measure(agentPid, async () => {
    await eachLimited(vmms, (vmm) => agent.ensureVmm(host.url, vmm.id, {
      instanceId: vmm.instanceId,
      instanceName: `bench-${vmm.id.slice(0, 8)}`,
      spec: { vcpus: 1, memoryMiB: 256, boot: { kernel: 'vmlinux', cmdline: 'sim.boot_ms=0' } }
    }))
    await allIn('running')
  })).figures

  console.log(`${VMMS} VMMs running; measuring the agent at rest`)
  const running = (await measure(agentPid, () => sleep(IDLE_SECONDS * 1000))).figures

  console.log(`stopping ${VMMS} VMMs`)
  const stop = (await measure(agentPid, async () => {
    await eachLimited(vmms, (vmm) => agent.pressPowerButton(host.url, vmm.id, { killAfterMs: 60_000 }))
    await allIn('destroyed')
    await eachLimited(vmms, (vmm) => agent.destroyVmm(host.url, vmm.id))
  })).figures

  console.log('reading the report lag from the workflow histories')
  const lags = await reportLags(stack.info.temporalAddress, stack.info.namespace, vmms.map((v) => v.instanceId))

  const results = {
    vmms: VMMS,
    agent: { idle: summarise(idle), boot: summarise(boot), running: summarise(running), stop: summarise(stop) },
    reportLag: lagSummary(lags.map((l) => l.ms)),
    reportLagByState: Object.fromEntries([...new Set(lags.map((l) => l.state))].map((state) =>
      [state, lagSummary(lags.filter((l) => l.state === state).map((l) => l.ms))])),
    machine: describeMachine(temporal)
  }
  printTable(results)
  const file = join(REPO_ROOT, 'bench', 'results', `agent-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
  await mkdir(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
  await writeFile(file, JSON.stringify(results, null, 2) + '\n')
  console.log(`\nwrote ${file}`)
} finally {
  await stack.stop()
}

function lagSummary (ms: number[]) {
  return { reports: ms.length, p50Ms: round(percentile(ms, 50)), p99Ms: round(percentile(ms, 99)) }
}

function summarise (figures: PhaseFigures) {
  return { seconds: round(figures.seconds), cpuPercent: round(figures.cpuPercent), peakRssMB: round(figures.peakRssMB) }
}

/** Milliseconds from each report's `observedAt` to the signal event Temporal recorded for it. */
async function reportLags (address: string, namespace: string, instanceIds: string[]): Promise<Array<{ state: string, ms: number }>> {
  const connection = await Connection.connect({ address })
  const client = new Client({ connection, namespace })
  const lags: Array<{ state: string, ms: number }> = []
  try {
    for (const instanceId of instanceIds) {
      const workflowId = instanceWorkflowId(instanceId)
      for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
        const history = await client.workflow.getHandle(workflowId, execution.runId).fetchHistory()
        for (const event of history.events ?? []) {
          const signal = event.workflowExecutionSignaledEventAttributes
          if (signal?.signalName !== 'vmmReport' || event.eventTime == null) continue
          const report = defaultPayloadConverter.fromPayload<VmmReport>(signal.input!.payloads![0])
          const acceptedMs = Number(event.eventTime.seconds) * 1000 + Math.floor((event.eventTime.nanos ?? 0) / 1e6)
          lags.push({ state: report.state, ms: acceptedMs - Date.parse(report.observedAt) })
        }
      }
    }
  } finally {
    await connection.close()
  }
  return lags
}

function printTable (results: { vmms: number, agent: Record<string, ReturnType<typeof summarise>>, reportLag: ReturnType<typeof lagSummary>, reportLagByState: Record<string, ReturnType<typeof lagSummary>> }): void {
  console.log(`\nhost agent with ${results.vmms} simulated VMMs`)
  console.log('phase      seconds   CPU % of a core   peak RSS MB')
  for (const [phase, f] of Object.entries(results.agent)) {
    console.log(`${phase.padEnd(10)} ${String(f.seconds).padStart(7)}   ${String(f.cpuPercent).padStart(15)}   ${String(f.peakRssMB).padStart(11)}`)
  }
  console.log(`report lag (observed → accepted by Temporal) over ${results.reportLag.reports} reports: p50 ${results.reportLag.p50Ms} ms, p99 ${results.reportLag.p99Ms} ms`)
  for (const [state, lag] of Object.entries(results.reportLagByState)) {
    console.log(`  reports of ${state.padEnd(10)} ${String(lag.reports).padStart(4)}: p50 ${lag.p50Ms} ms, p99 ${lag.p99Ms} ms`)
  }
}
