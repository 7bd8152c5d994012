/**
 * Watches, from every host agent at once, whether any instance runs its guest in two VMMs (I6),
 * for the fault tests that move VMs (the drain under fire, the migration storm, the lost
 * acknowledgement).
 *
 * What an agent's view says of a VMM's guest (docs/design.md §15):
 * - a migration's target runs it only once its half is `finished` (the commit point); before,
 *   it has no VM, and a `failed` target is killed;
 * - a migration's source runs it while its half is `sending` (precopy; and, once its target has
 *   finished, paused by Cloud Hypervisor for the downtime, unless the acknowledgement was lost
 *   and Cloud Hypervisor resumed it: the agent alone tells the two apart, a reaction later) or
 *   `failed` (resumed); not once `finished` (paused for good, it exits) or `held` (its agent
 *   paused it after a send that failed past the downtime, until the control plane decides);
 * - any other VMM that is not gone runs it (a `starting` one counts: its guest may be booting).
 *
 * So a source `sending` beside its `finished` target counts as a double: the sampler measures
 * the window from the target's commit to the source's agent acting on its outcome, which is what
 * the bound is about. A double is a window: consecutive samples that show the same instance
 * running twice; its length runs from the first sample that shows it to the first that does not.
 * An agent that does not answer within the interval (restarting, or cut off) is skipped for that sample, and counted;
 * a double with a VMM on its host is then neither ended nor split: shown again once the host is
 * heard, it is one double, the gap included (a VMM seen running the guest before and after ran
 * it throughout); not shown again, it ended at the first sample its host was not heard in.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { HostAgentClient } from '../../http/host-agent-client.js'
import type { VmmView } from '../../domain/host-agent-api.js'
import { isTerminalVmmState } from '../../domain/vmm.js'
import type { TestStack } from './stack.js'

/** The window the invariant tolerates: at most the source agent's reaction to its send's outcome. */
export const DOUBLE_RUN_BOUND_MS = 500

export function runsGuest (vmm: SampledVmm): boolean {
  if (isTerminalVmmState(vmm.state)) return false
  const half = vmm.migration
  if (half === null || half === undefined) return true
  if (half.role === 'target') return half.phase === 'finished'
  return half.phase === 'sending' || half.phase === 'failed'
}

export interface DoubleRun {
  instanceId: string
  /** The VMMs seen running the guest, as `<vmm> on <host> (<role> <phase>)`. */
  vmms: string[]
  startedAt: number
  /** When the first sample that did not show it was taken (or the first its host was not heard in); null while it lasts. */
  endedAt: number | null
  /** From the first sample that showed it to the first that did not. */
  durationMs: number
}

export interface SamplerReport {
  samples: number
  /** Hosts not heard in a sample: no answer within the interval (the agent restarting, or its host cut off). */
  skipped: number
  doubles: DoubleRun[]
  /** The longest double, in ms (0 without any). */
  longestMs: number
}

export interface GuestSampler {
  stop: () => Promise<SamplerReport>
}

/**
 * Samples every agent of the stack every `intervalMs` until stopped, giving up on a read after
 * `readTimeoutMs`. Each sample asks every agent whose last read has ended, and takes the answers
 * that come within the interval: an agent that answers later (its host cut off, its read waiting
 * out the client's timeout) is not heard in that sample, and its late answer, about a moment
 * already past, is dropped. So a host that does not answer never slows the sampling of the
 * others: waiting for every answer made a sample take the 1 s timeout while a host was cut off,
 * and a double on two other hosts measured 1.1 s in the migration storm.
 */
export function sampleGuests (stack: TestStack, intervalMs = 100, readTimeoutMs = 1000): GuestSampler {
  const agents = new HostAgentClient({ token: stack.info.agentToken, timeoutMs: readTimeoutMs })
  const windows = new DoubleWindows()
  /** The hosts whose read, from an earlier sample, has not ended yet. */
  const reading = new Set<string>()
  let samples = 0
  let skipped = 0
  const stopped = new AbortController()
  const loop = (async () => {
    while (!stopped.signal.aborted) {
      const sample: Sample = { at: Date.now(), running: new Map(), unheard: new Set(stack.info.hosts.map((host) => host.id)) }
      const answers = stack.info.hosts.filter((host) => !reading.has(host.id)).map(async (host) => {
        reading.add(host.id)
        try {
          const vmms = await agents.listVmms(host.url)
          sample.unheard.delete(host.id)
          for (const vmm of vmms) {
            if (runsGuest(vmm)) sample.running.set(vmm.instanceId, [...sample.running.get(vmm.instanceId) ?? [], vmm])
          }
        } catch {
          // Not heard: the host stays in `unheard`.
        } finally {
          reading.delete(host.id)
        }
      })
      await Promise.race([Promise.all(answers), sleep(intervalMs)])
      // Answers that come later change `sample`, not what was taken.
      const taken = { ...sample, running: new Map(sample.running), unheard: new Set(sample.unheard) }
      samples++
      skipped += taken.unheard.size
      windows.add(taken)
      await sleep(Math.max(0, sample.at + intervalMs - Date.now()))
    }
  })()
  return {
    stop: async () => {
      stopped.abort()
      await loop
      return { samples, skipped, doubles: windows.doubles, longestMs: Math.max(0, ...windows.doubles.map((d) => d.durationMs)) }
    }
  }
}

/** What a VMM's view tells the sampler: whose it is, where, and what it does. */
export type SampledVmm = Pick<VmmView, 'id' | 'instanceId' | 'hostId' | 'state' | 'migration'>

/** One moment seen from every agent: the VMMs running each instance's guest, and the hosts whose agent did not answer. */
export interface Sample {
  at: number
  running: Map<string, SampledVmm[]>
  unheard: Set<string>
}

/** The doubles a sequence of samples shows, as windows (the module comment says how they are measured). */
export class DoubleWindows {
  readonly doubles: DoubleRun[] = []
  /** The doubles still open: the hosts their VMMs were seen on, and since when one of those has not answered. */
  private readonly open = new Map<string, { run: DoubleRun, hosts: Set<string>, unheardSince: number | null }>()

  add ({ at, running, unheard }: Sample): void {
    for (const [instanceId, entry] of this.open) {
      const vmms = running.get(instanceId) ?? []
      if (vmms.length > 1) {
        for (const vmm of vmms) entry.hosts.add(vmm.hostId)
        entry.run.durationMs = at - entry.run.startedAt
        entry.unheardSince = null
        continue
      }
      if ([...entry.hosts].some((host) => unheard.has(host))) {
        entry.unheardSince ??= at
        continue
      }
      const endedAt = entry.unheardSince ?? at
      entry.run.endedAt = endedAt
      entry.run.durationMs = endedAt - entry.run.startedAt
      this.open.delete(instanceId)
    }
    for (const [instanceId, vmms] of running) {
      if (vmms.length < 2 || this.open.has(instanceId)) continue
      const run: DoubleRun = { instanceId, vmms: vmms.map(describe), startedAt: at, endedAt: null, durationMs: 0 }
      this.open.set(instanceId, { run, hosts: new Set(vmms.map((vmm) => vmm.hostId)), unheardSince: null })
      this.doubles.push(run)
    }
  }
}

function describe (vmm: SampledVmm): string {
  return `${vmm.id} on ${vmm.hostId} (${vmm.migration === null || vmm.migration === undefined ? 'no migration' : `${vmm.migration.role} ${vmm.migration.phase}`})`
}
