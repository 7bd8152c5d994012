/**
 * The invariants a quiet stack must hold (docs/design.md I3, I5), checked against everything at
 * once: PostgreSQL, every host agent's records and the VMM processes actually running under
 * each host's state directory. The fault tests and the crash campaign call it once their work
 * has settled; it reports what it found rather than throwing, so that one check names every
 * violation.
 *
 * - no duplicates: an instance has at most one live VMM in PostgreSQL, and a running instance
 *   exactly one, which is its active VMM, running on its host with exactly one process;
 * - no orphans: every VMM process and every live agent record belongs to a live VMM in
 *   PostgreSQL whose instance is not destroyed; every disk file in the storage to a live disk,
 *   every seed to a live instance, nothing is left half-made; every TAP in a host's network
 *   namespace to a live VMM on that host (an interface of its instance), and every network
 *   segment's device to the network of such an interface, or one the firewall rules route such a
 *   network to (db/firewall-rules.ts `policiesOf`); the host's firewall
 *   names exactly the segments it has (no rule of one gone, none missing for one there);
 * - nothing leaked: no reservation held for a VMM that is gone, no address, MAC or disk space
 *   held for a destroyed instance;
 * - no duplicates: no address or MAC held by two live interfaces;
 * - nothing stuck: no operation left in flight, and every instance at the state it is meant to be
 *   (a running one with its disks made and its TAPs on its host, each on its network's segment).
 */
import { existsSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import pg from 'pg'
import { policiesOf } from '../../db/firewall-rules.js'
import { isVmplaneTapName, tapNameOf } from '../../domain/interfaces.js'
import { segmentBridgeOf, segmentVxlanOf, vniOfSegmentDevice } from '../../domain/network-segments.js'
import { diskFileOf, seedFileOf } from '../../domain/storage.js'
import { isTerminalVmmState, type VmmState } from '../../domain/vmm.js'
import { runCommand } from '../../host-agent/process/command.js'
import { findVmmProcesses, processCommandLine } from '../../stack/processes.js'
import type { StackInfo } from '../../stack/stack-file.js'

export interface InvariantReport {
  instances: number
  /** VMM processes under a host's directory that no live VMM in PostgreSQL accounts for. */
  orphanProcesses: string[]
  /** Live agent records that no live VMM in PostgreSQL accounts for. */
  orphanRecords: string[]
  /** Instances with more than one live VMM, or more than one process for their VMM. */
  duplicates: string[]
  leakedReservations: string[]
  /** Disk files, seeds and half-made files in the storage that no live record owns. */
  orphanDisks: string[]
  /** TAPs in a host's namespace that no live VMM on that host has. */
  orphanTaps: string[]
  /** Segment devices in a host's namespace of a network no live VMM on that host has an interface on or a route to. */
  orphanSegments: string[]
  /** Firewall rules of a segment a host does not have, or a segment of a host its firewall has no rule for. */
  firewallDrift: string[]
  /** Addresses (and MACs, and disk space) still held for destroyed instances. */
  leakedAddresses: string[]
  /** Addresses or MACs held by more than one live interface. */
  duplicateAddresses: string[]
  operationsInFlight: string[]
  /** Instances not at their intended state, or whose state their VMM's reality contradicts. */
  notAtIntent: string[]
}

export function violationsOf (report: InvariantReport): string[] {
  return [
    ...report.orphanProcesses, ...report.orphanRecords, ...report.duplicates,
    ...report.leakedReservations, ...report.orphanDisks, ...report.orphanTaps, ...report.orphanSegments, ...report.firewallDrift, ...report.leakedAddresses,
    ...report.duplicateAddresses, ...report.operationsInFlight, ...report.notAtIntent
  ]
}

export async function checkInvariants (stack: StackInfo): Promise<InvariantReport> {
  const client = new pg.Client({ connectionString: stack.databaseUrl })
  await client.connect()
  try {
    const instances = (await client.query(
      'SELECT id, name, state, intended_state, active_vmm_id, destroyed_at FROM instances'
    )).rows
    const liveVmms = (await client.query(
      'SELECT v.id, v.instance_id, v.host_id, v.state FROM vmms v WHERE v.state NOT IN (\'destroyed\', \'failed\', \'lost\')'
    )).rows
    const leaked = (await client.query(
      'SELECT r.vmm_id, v.state FROM reservations r JOIN vmms v ON v.id = r.vmm_id WHERE v.state IN (\'destroyed\', \'failed\', \'lost\')'
    )).rows
    const inFlight = (await client.query(
      'SELECT id, instance_id, kind, status FROM operations WHERE finished_at IS NULL'
    )).rows
    const disks = (await client.query(
      'SELECT d.id, d.instance_id, d.image, d.destroyed_at, i.destroyed_at AS instance_destroyed_at FROM disks d JOIN instances i ON i.id = d.instance_id'
    )).rows
    const interfaces = (await client.query(
      `SELECT n.id, n.instance_id, n.network_id, w.vni, host(n.ip) AS ip, n.mac::text AS mac, n.released_at, i.destroyed_at AS instance_destroyed_at
         FROM interfaces n JOIN instances i ON i.id = n.instance_id JOIN networks w ON w.id = n.network_id`
    )).rows

    const report: InvariantReport = {
      instances: instances.length,
      orphanProcesses: [],
      orphanRecords: [],
      duplicates: [],
      leakedReservations: leaked.map((r) => `reservation of ${r.state} VMM ${r.vmm_id} not released`),
      orphanDisks: await orphanStorage(stack, disks, instances),
      orphanTaps: [],
      orphanSegments: [],
      firewallDrift: [],
      leakedAddresses: [
        ...interfaces.filter((n) => n.released_at === null && n.instance_destroyed_at !== null)
          .map((n) => `address ${n.ip} and MAC ${n.mac} still held for destroyed instance ${n.instance_id}`),
        ...disks.filter((d) => d.destroyed_at === null && d.instance_destroyed_at !== null)
          .map((d) => `disk ${d.id} still held for destroyed instance ${d.instance_id}`)
      ],
      duplicateAddresses: duplicatesAmong(interfaces.filter((n) => n.released_at === null)),
      operationsInFlight: inFlight.map((o) => `${o.kind} operation ${o.id} of instance ${o.instance_id} still ${o.status}`),
      notAtIntent: []
    }
    const byId = new Map(liveVmms.map((v) => [v.id as string, v]))
    const instanceById = new Map(instances.map((i) => [i.id as string, i]))
    const processes = await vmmProcessesByVmm(stack)
    const agentRecords = await liveAgentRecords(stack)

    for (const [vmmId, pids] of processes) {
      const vmm = byId.get(vmmId)
      if (vmm === undefined || instanceById.get(vmm.instance_id)?.destroyed_at !== null) {
        report.orphanProcesses.push(`VMM process(es) ${pids.join(', ')} of ${vmmId}: no live VMM in PostgreSQL`)
      } else if (pids.length > 1) {
        report.duplicates.push(`VMM ${vmmId} has ${pids.length} processes: ${pids.join(', ')}`)
      }
    }
    for (const { hostId, vmmId, state } of agentRecords) {
      if (byId.get(vmmId)?.host_id !== hostId) report.orphanRecords.push(`${hostId} holds VMM ${vmmId} (${state}), not live in PostgreSQL`)
    }

    const links = await networkLinksByHost(stack)
    report.firewallDrift.push(...await firewallDriftOf(stack, links))
    const taps = new Map([...links].map(([hostId, found]) => [hostId, found.filter((link) => isVmplaneTapName(link.ifname)).map((link) => link.ifname)]))
    const liveInterfacesOf = (instanceId: string): Array<Record<string, any>> => interfaces.filter((n) => n.instance_id === instanceId && n.released_at === null)
    const interfacesOf = (instanceId: string): string[] => liveInterfacesOf(instanceId).map((n) => tapNameOf(n.id))
    for (const [hostId, found] of links) {
      const onHost = liveVmms.filter((v) => v.host_id === hostId).flatMap((v) => liveInterfacesOf(v.instance_id))
      const expectedTaps = new Set(onHost.map((n) => tapNameOf(n.id)))
      const routed = await policiesOf(client, [...new Set(liveVmms.filter((v) => v.host_id === hostId).map((v) => v.instance_id as string))])
      const expectedVnis = new Set([...onHost.map((n) => n.vni as number), ...[...routed.values()].flatMap((policy) => policy.routes.map((route) => route.vni))])
      for (const name of taps.get(hostId) ?? []) if (!expectedTaps.has(name)) report.orphanTaps.push(`TAP ${name} on ${hostId}: no live VMM on that host has it`)
      for (const { ifname } of found) {
        const vni = vniOfSegmentDevice(ifname)
        if (vni !== null && !expectedVnis.has(vni)) report.orphanSegments.push(`segment device ${ifname} (VNI ${vni}) on ${hostId}: no live VMM on that host has an interface on its network or a route to it`)
      }
    }

    const liveByInstance = new Map<string, typeof liveVmms>()
    for (const vmm of liveVmms) liveByInstance.set(vmm.instance_id, [...(liveByInstance.get(vmm.instance_id) ?? []), vmm])
    for (const instance of instances) {
      const live = liveByInstance.get(instance.id) ?? []
      const label = `instance ${instance.name} (${instance.id}, ${instance.state}, meant ${instance.intended_state})`
      if (live.length > 1) report.duplicates.push(`${label} has ${live.length} live VMMs`)
      if (instance.state !== instance.intended_state) report.notAtIntent.push(`${label} is not at its intended state`)
      if (instance.state === 'running') {
        const vmm = live.find((v) => v.id === instance.active_vmm_id)
        const pids = vmm === undefined ? [] : processes.get(vmm.id) ?? []
        const onAgent = vmm !== undefined && agentRecords.some((r) => r.vmmId === vmm.id && r.hostId === vmm.host_id)
        if (vmm === undefined || pids.length !== 1 || !onAgent) {
          report.notAtIntent.push(`${label}: active VMM ${instance.active_vmm_id} is ${vmm?.state ?? 'not live'}, ${pids.length} process(es), ${onAgent ? '' : 'not '}on its host`)
        }
        const missingTaps = vmm === undefined ? [] : interfacesOf(instance.id).filter((name) => !(taps.get(vmm.host_id) ?? []).includes(name))
        if (missingTaps.length > 0) report.notAtIntent.push(`${label}: TAP(s) ${missingTaps.join(', ')} missing on ${vmm!.host_id}`)
        const offSegment = vmm === undefined ? [] : liveInterfacesOf(instance.id).filter((n) => !onItsSegment(links.get(vmm.host_id) ?? [], tapNameOf(n.id), n.vni))
        if (offSegment.length > 0) report.notAtIntent.push(`${label}: TAP(s) ${offSegment.map((n) => tapNameOf(n.id)).join(', ')} not on their network's whole segment on ${vmm!.host_id}`)
        const missingDisks = disks.filter((d) => d.instance_id === instance.id && d.destroyed_at === null && !storageHas(stack, d))
        if (missingDisks.length > 0) report.notAtIntent.push(`${label}: disk(s) ${missingDisks.map((d) => d.id).join(', ')} missing from the storage`)
      } else if (live.length > 0 && ['stopped', 'destroyed', 'failed'].includes(instance.state)) {
        report.notAtIntent.push(`${label} still has live VMM(s) ${live.map((v) => v.id).join(', ')}`)
      }
    }
    return report
  } finally {
    await client.end()
  }
}

/** Files in the storage no live record owns: disks of no live disk, seeds of no live instance, half-made files. */
async function orphanStorage (stack: StackInfo, disks: Array<Record<string, any>>, instances: Array<Record<string, any>>): Promise<string[]> {
  const dir = stack.hosts[0]?.storageDir
  if (dir === undefined) return []
  const liveDisks = new Set(disks.filter((d) => d.destroyed_at === null).map((d) => diskFileOf({ id: d.id, image: d.image })))
  const liveSeeds = new Set(instances.filter((i) => i.destroyed_at === null).map((i) => seedFileOf(i.id)))
  const found: string[] = []
  for (const [sub, live] of [['disks', liveDisks], ['seeds', liveSeeds], ['partial', new Set<string>()]] as const) {
    for (const name of await readdir(join(dir, sub)).catch(() => [])) {
      if (!live.has(`${sub}/${name}`)) found.push(`${sub}/${name} in the storage: no live record owns it`)
    }
  }
  return found
}

function storageHas (stack: StackInfo, disk: Record<string, any>): boolean {
  const dir = stack.hosts[0]?.storageDir
  return dir !== undefined && existsSync(join(dir, diskFileOf({ id: disk.id, image: disk.image })))
}

function duplicatesAmong (live: Array<Record<string, any>>): string[] {
  const found: string[] = []
  for (const [what, key] of [['address', (n: Record<string, any>) => `${n.network_id} ${n.ip}`], ['MAC', (n: Record<string, any>) => n.mac]] as const) {
    const holders = new Map<string, string[]>()
    for (const n of live) holders.set(key(n), [...(holders.get(key(n)) ?? []), n.id])
    for (const [value, ids] of holders) if (ids.length > 1) found.push(`${what} ${value} held by ${ids.length} live interfaces: ${ids.join(', ')}`)
  }
  return found
}

interface Link { ifname: string, master?: string }

/**
 * Each host's firewall against its segments: a bridge its tables name that the host does not
 * have, or one it has whose own traffic they do not let through (host-agent/network/host-firewall.ts).
 */
async function firewallDriftOf (stack: StackInfo, linksByHost: ReadonlyMap<string, Link[]>): Promise<string[]> {
  const found: string[] = []
  for (const host of stack.hosts) {
    const names = (linksByHost.get(host.id) ?? []).map((link) => link.ifname)
    const bridges = new Set(names.filter((name) => name.startsWith('vmpn') && vniOfSegmentDevice(name) !== null))
    const table = await runCommand('ip', ['netns', 'exec', host.netns, 'nft', 'list', 'table', 'inet', 'vmplane']).catch(() => '')
    const named = new Set([...table.matchAll(/"(vmpn[0-9a-f]{6})"/g)].map((match) => match[1]!))
    for (const bridge of named) if (!bridges.has(bridge)) found.push(`the firewall of ${host.id} names ${bridge}, which it does not have`)
    for (const bridge of bridges) {
      if (!table.includes(`iifname "${bridge}" ip saddr `)) found.push(`${host.id} has ${bridge}, whose own traffic its firewall does not let through`)
    }
  }
  return found
}

/** Every link in each host's network namespace (TAPs, segments' bridges and VXLAN devices among them). */
async function networkLinksByHost (stack: StackInfo): Promise<Map<string, Link[]>> {
  const found = new Map<string, Link[]>()
  for (const host of stack.hosts) {
    found.set(host.id, JSON.parse(await runCommand('ip', ['-n', host.netns, '-json', 'link', 'show'])) as Link[])
  }
  return found
}

/** Whether the TAP is on its network's bridge, with the network's VXLAN device on it too. */
function onItsSegment (links: Link[], tap: string, vni: number): boolean {
  const bridge = segmentBridgeOf(vni)
  const masterOf = (name: string): string | undefined => links.find((link) => link.ifname === name)?.master
  return masterOf(tap) === bridge && masterOf(segmentVxlanOf(vni)) === bridge
}

/** Every VMM process under every host's state directory, by the VMM ID in its socket path. */
async function vmmProcessesByVmm (stack: StackInfo): Promise<Map<string, number[]>> {
  const found = new Map<string, number[]>()
  for (const host of stack.hosts) {
    const vmmsDir = join(host.stateDir, 'vmms')
    for (const pid of await findVmmProcesses(vmmsDir)) {
      const argv = (await processCommandLine(pid))?.join(' ') ?? ''
      const vmmId = new RegExp(`${vmmsDir}/([^/]+)/`).exec(argv)?.[1] ?? `unknown (pid ${pid})`
      found.set(vmmId, [...(found.get(vmmId) ?? []), pid])
    }
  }
  return found
}

async function liveAgentRecords (stack: StackInfo): Promise<Array<{ hostId: string, vmmId: string, state: string }>> {
  const records = []
  for (const host of stack.hosts) {
    const response = await fetch(`${host.url}/v1/vmms`, {
      headers: { authorization: `Bearer ${stack.agentToken}` },
      signal: AbortSignal.timeout(10_000)
    })
    if (!response.ok) throw new Error(`GET ${host.url}/v1/vmms answered ${response.status}`)
    const { items } = await response.json() as { items: Array<{ id: string, state: VmmState }> }
    for (const vmm of items) if (!isTerminalVmmState(vmm.state)) records.push({ hostId: host.id, vmmId: vmm.id, state: vmm.state })
  }
  return records
}
