/**
 * What each kind of answer looks like as a table. An instance's detail view is built to answer
 * "why is it in this state?": the state beside the intended one, the operation in flight, its
 * VMM and host, the last error and the current conditions, in that order.
 */
import type { Accepted, FirewallRule, Host, Image, Instance, InstanceEvent, Network, NewToken, Operation, Project, Quotas, Token } from './api-types.js'
import { fields, seconds, table, timestamp } from './output.js'

export function instanceDetail (instance: Instance): string {
  return fields([
    ['name', instance.name],
    ['id', instance.id],
    ['state', `${instance.state} (intended: ${instance.intendedState})`],
    ['operation', instance.operation === null ? 'none in flight' : operationSummary(instance.operation)],
    ['vmm', vmmSummary(instance.vmm)],
    // An API older than live migration sends no migration at all.
    ...(instance.migration == null ? [] : [['migration', migrationSummary(instance.migration)] as [string, string]]),
    ['last error', instance.lastError === null ? 'none' : `${instance.lastError.code}: ${instance.lastError.message} (${timestamp(instance.lastError.at)})`],
    ['conditions', instance.conditions.length === 0
      ? 'none'
      : instance.conditions.map((c) => `${c.type} since ${timestamp(c.since)}: ${c.message}`).join('\n')],
    ['size', `${instance.vcpus} vCPU, ${instance.memoryMiB} MiB`],
    ['boot', bootSummary(instance.boot)],
    ['disks', instance.disks.length === 0
      ? 'none'
      : instance.disks.map((d) => `${d.device} ${d.name} ${d.sizeGiB} GiB${d.image === null ? '' : ` from ${d.image}`}, ${d.state} (${d.location})`).join('\n')],
    ['interfaces', instance.interfaces.length === 0
      ? 'none'
      : instance.interfaces.map((n) => `${n.name} ${n.ip}/${n.prefixLength} on ${n.network.name}, gateway ${n.gateway}, MAC ${n.mac}, TAP ${n.tap}${n.released ? ' (released)' : ''}`).join('\n')],
    ['cloud-init', instance.cloudInit === null
      ? 'none'
      : `${instance.cloudInit.sshKeys.length} SSH key(s), ${instance.cloudInit.userDataBytes} bytes of user-data`],
    ['policy', `restart ${instance.restartPolicy}, on host failure ${instance.onHostFailure}, stop grace ${instance.stopGraceSeconds} s`],
    ['created', timestamp(instance.createdAt)],
    ['updated', timestamp(instance.updatedAt)],
    ...(instance.destroyedAt === null ? [] : [['destroyed', timestamp(instance.destroyedAt)] as [string, string]])
  ])
}

function migrationSummary (m: NonNullable<Instance['migration']>): string {
  const side = (s: NonNullable<typeof m.target>): string => `${s.hostId} (VMM ${s.vmmId}, ${s.vmmState}${s.phase === null ? '' : `, ${s.phase}`})`
  return [
    `${m.id}: ${m.phase}, ${m.progress.memoryIterations} memory iteration(s), since ${timestamp(m.startedAt)}`,
    `from ${side(m.source)}`,
    `to ${m.target === null ? (m.requestedHostId ?? 'a host to be chosen') : side(m.target)}`,
    ...(m.reason === null ? [] : [m.reason])
  ].join('\n')
}

export function instanceTable (instances: Instance[]): string {
  return table(
    ['NAME', 'STATE', 'INTENDED', 'HOST', 'OPERATION', 'CONDITIONS', 'ID'],
    instances.map((i) => [
      i.name,
      i.state,
      i.intendedState,
      i.vmm?.hostId ?? '-',
      i.operation === null ? '-' : i.operation.kind,
      i.conditions.length === 0 ? '-' : i.conditions.map((c) => c.type).join(','),
      i.id
    ])
  )
}

export function eventTable (events: InstanceEvent[]): string {
  return table(
    ['AT', 'KIND', 'STATE', 'MESSAGE'],
    events.map((e) => [timestamp(e.at), e.kind, e.state ?? '-', e.message])
  )
}

export function hostTable (hosts: Host[]): string {
  return table(
    ['ID', 'STATUS', 'SCHEDULING', 'VCPUS USED', 'MEMORY USED', 'VMMS', 'LAST HEARTBEAT', 'AGENT'],
    hosts.map((h) => [
      h.id,
      h.contactFailingSince === null ? h.status : `${h.status} (no contact since ${timestamp(h.contactFailingSince)})`,
      schedulingOf(h),
      `${h.reserved.vcpus}/${h.capacity.vcpus}`,
      `${h.reserved.memoryMiB}/${h.capacity.memoryMiB} MiB`,
      String(h.liveVmms),
      timestamp(h.lastHeartbeatAt),
      h.agentUrl
    ])
  )
}

/** Whether the host takes new VMMs, and how its drain goes. */
function schedulingOf (host: Host): string {
  if (host.cordonedAt === null) return 'schedulable'
  const drain = host.drain
  if (drain === null || (drain.finishedAt !== null && drain.status !== 'drained')) return 'cordoned'
  return `cordoned, ${drain.status} (${drain.migrated}/${drain.instancesFound} migrated${drain.failed > 0 ? `, ${drain.failed} failed` : ''})`
}

export function operationDetail (operation: Operation): string {
  const finishedAt = operation.finishedAt ?? null
  const took = finishedAt === null ? '' : ` (took ${seconds(Date.parse(finishedAt) - Date.parse(operation.startedAt))})`
  return fields([
    ['id', operation.id],
    ['kind', operation.kind],
    ['instance', operation.instanceId],
    ['status', operation.status],
    ['error', operation.error == null ? 'none' : `${operation.error.code}: ${operation.error.message}`],
    ['started', timestamp(operation.startedAt)],
    ['finished', `${timestamp(finishedAt)}${took}`],
    ['workflow', `${operation.workflowId} (run ${operation.runId ?? '-'})`]
  ])
}

/** The answer to a change made without `--wait`: what was accepted, and how to follow it. */
export function acceptedSummary ({ instance, operation, message }: Accepted): string {
  if (operation === null) return `${instance.name}: ${message ?? 'nothing to do'} (state: ${instance.state})`
  return `${instance.name}: ${operation.kind} accepted as operation ${operation.id}; state: ${instance.state}\n` +
    `follow it with: vmplane operations get ${operation.id}`
}

function operationSummary (operation: Operation): string {
  return `${operation.kind} ${operation.id}, ${operation.status} since ${timestamp(operation.startedAt)}`
}

function vmmSummary (vmm: Instance['vmm']): string {
  if (vmm === null) return 'none'
  const reason = vmm.reason === null ? '' : ` (${vmm.reason})`
  const exit = vmm.exit === null
    ? ''
    : `; exited: ${vmm.exit.cause}${vmm.exit.code === null ? '' : `, code ${vmm.exit.code}`}${vmm.exit.signal === null ? '' : `, signal ${vmm.exit.signal}`}`
  return `${vmm.id} on ${vmm.hostId}: ${vmm.state}${reason}${exit}`
}

function bootSummary (boot: Instance['boot']): string {
  const parts = [`kernel ${boot.kernel}`]
  if (boot.initramfs !== undefined) parts.push(`initramfs ${boot.initramfs}`)
  if (boot.cmdline !== undefined) parts.push(`cmdline ${JSON.stringify(boot.cmdline)}`)
  return parts.join(', ')
}

export function networkTable (networks: Network[]): string {
  return table(
    ['NAME', 'CIDR', 'GATEWAY', 'VNI', 'ADDRESSES USED', 'ID'],
    networks.map((n) => [n.name, n.cidr, n.gateway, String(n.vni), `${n.addressesInUse}/${n.addressesTotal}`, n.id])
  )
}

export function networkDetail (network: Network): string {
  return fields([
    ['name', network.name],
    ['id', network.id],
    ['cidr', network.cidr],
    ['gateway', network.gateway],
    ['vni', String(network.vni)],
    ['mtu', String(network.mtu)],
    ['outbound', network.outbound],
    ['addresses', `${network.addressesInUse} in use of ${network.addressesTotal}`],
    ['created', timestamp(network.createdAt)]
  ])
}

/** A rule's target or peer: `network back`, `instance web`, or an address range as it is. */
function ruleEnd (end: FirewallRule['target'] | FirewallRule['peer']): string {
  if ('cidr' in end) return end.cidr
  return 'network' in end ? `network ${end.network.name}` : `instance ${end.instance.name}`
}

/** `8080`, `8000-8100`; no ports are every port of tcp and udp, and mean nothing to icmp and any. */
function rulePorts ({ protocol, ports }: FirewallRule): string {
  if (ports === null) return protocol === 'tcp' || protocol === 'udp' ? 'all' : '-'
  return ports.from === ports.to ? String(ports.from) : `${ports.from}-${ports.to}`
}

export function firewallRuleTable (rules: FirewallRule[]): string {
  return table(
    ['TARGET', 'DIRECTION', 'PROTOCOL', 'PORTS', 'PEER', 'DESCRIPTION', 'ID'],
    rules.map((r) => [ruleEnd(r.target), r.direction, r.protocol, rulePorts(r), ruleEnd(r.peer), r.description === '' ? '-' : r.description, r.id])
  )
}

export function firewallRuleDetail (rule: FirewallRule): string {
  return fields([
    ['id', rule.id],
    ['target', ruleEnd(rule.target)],
    ['direction', rule.direction],
    ['protocol', rule.protocol],
    ['ports', rulePorts(rule)],
    ['peer', ruleEnd(rule.peer)],
    ['description', rule.description === '' ? '-' : rule.description],
    ['created', timestamp(rule.createdAt)]
  ])
}

export function imageTable (images: Image[]): string {
  return table(
    ['NAME', 'FORMAT', 'VIRTUAL SIZE', 'SHA256', 'HOSTS'],
    images.map((i) => [i.name, i.format, `${(i.virtualSizeBytes / 1024 ** 3).toFixed(1)} GiB`, i.sha256.slice(0, 12), i.hosts.join(',')])
  )
}

export function projectTable (projects: Project[]): string {
  return table(['NAME', 'ID', 'CREATED'], projects.map((p) => [p.name, p.id, timestamp(p.createdAt)]))
}

export function quotasTable ({ limits, use }: Quotas): string {
  return table(['RESOURCE', 'USED', 'LIMIT'], Object.entries(use).map(([resource, used]) => [resource, String(used), limits[resource] === null ? 'none' : String(limits[resource])]))
}

export function tokenTable (tokens: Token[]): string {
  return table(
    ['NAME', 'ROLE', 'EXPIRES', 'REVOKED', 'ID'],
    tokens.map((t) => [t.name, t.role, timestamp(t.expiresAt), t.revokedAt === null ? '-' : timestamp(t.revokedAt), t.id])
  )
}

/** A new token, with the one time its secret is shown. */
export function newTokenDetail (token: NewToken): string {
  return fields([
    ['token', token.token],
    ['name', token.name],
    ['role', token.role],
    ['id', token.id],
    ['expires', timestamp(token.expiresAt)],
    ['note', 'shown this once: only its hash is kept']
  ])
}
