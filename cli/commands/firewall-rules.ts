/**
 * `vmplane firewall-rules list|get|create|delete`: what the project lets into and out of its
 * instances beyond their own network's traffic. A rule's target (`--network` or `--instance`)
 * and its peer (`--peer-cidr`, `--peer-network` or `--peer-instance`) are each one of their kind:
 * none or two is a usage error, before any request.
 */
import { InvalidArgumentError, Option, type Command } from 'commander'
import { FIREWALL_DIRECTIONS, FIREWALL_PROTOCOLS } from '../../domain/firewall.js'
import type { FirewallRule, FirewallRuleList } from '../api-types.js'
import { contextOf, show } from '../context.js'
import { UsageError } from '../errors.js'
import { firewallRuleDetail, firewallRuleTable } from '../views.js'

const RULE = '<rule>'
const RULE_HELP = 'the rule, by ID'

interface CreateFlags {
  network?: string
  instance?: string
  direction?: string
  protocol: string
  ports?: { from: number, to: number }
  peerCidr?: string
  peerNetwork?: string
  peerInstance?: string
  description?: string
}

/** `--ports 8080` or `--ports 8000-8100`; whether they are ports at all is the API's to say, naming its limits. */
function portRange (value: string): { from: number, to: number } {
  const match = /^(\d+)(?:-(\d+))?$/.exec(value)
  if (match === null) throw new InvalidArgumentError('must be a port or a range of ports, e.g. 8080 or 8000-8100.')
  return { from: Number(match[1]), to: Number(match[2] ?? match[1]) }
}

/** The one option of `choices` that is set, as the API's `{ kind: value }`; a usage error unless exactly one is. */
function oneOf (what: string, choices: Record<string, [flag: string, value: string | undefined]>): Record<string, string> {
  const given = Object.entries(choices).filter(([, [, value]]) => value !== undefined)
  if (given.length !== 1) {
    const flags = Object.values(choices).map(([flag]) => flag).join(', ')
    throw new UsageError(`${given.length === 0 ? 'no' : 'more than one'} ${what}: give exactly one of ${flags}`)
  }
  const [kind, [, value]] = given[0]!
  return { [kind]: value! }
}

function createBody (options: CreateFlags): Record<string, unknown> {
  return {
    target: oneOf('target', { network: ['--network', options.network], instance: ['--instance', options.instance] }),
    direction: options.direction,
    protocol: options.protocol,
    ports: options.ports,
    peer: oneOf('peer', { cidr: ['--peer-cidr', options.peerCidr], network: ['--peer-network', options.peerNetwork], instance: ['--peer-instance', options.peerInstance] }),
    description: options.description
  }
}

export function addFirewallRuleCommands (program: Command): void {
  const rules = program.command('firewall-rules').description('the traffic allowed into and out of instances beyond their own network')

  rules.command('list')
    .description("list the project's firewall rules, oldest first")
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<FirewallRuleList>(`${context.project}/firewall-rules`), (list) => firewallRuleTable(list.items))
    })

  rules.command('get')
    .description('show a firewall rule')
    .argument(RULE, RULE_HELP)
    .action(async (rule: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<FirewallRule>(`${context.project}/firewall-rules/${encodeURIComponent(rule)}`), firewallRuleDetail)
    })

  rules.command('create')
    .description('allow traffic into (ingress) or out of (egress) the instances of a network, or one instance, from or to a peer')
    .option('--network <network>', 'the target: every instance of this network, by name or ID')
    .option('--instance <instance>', 'the target: this instance, by name or ID')
    .addOption(new Option('--direction <direction>', 'ingress: into the target from the peer; egress: out of it to the peer (default: ingress)').choices(FIREWALL_DIRECTIONS))
    .addOption(new Option('--protocol <protocol>', 'the protocol allowed').choices(FIREWALL_PROTOCOLS).makeOptionMandatory())
    .option('--ports <ports>', 'for tcp and udp: a port or a range, e.g. 8080 or 8000-8100 (default: every port)', portRange)
    .option('--peer-cidr <cidr>', 'the peer: an IPv4 range, e.g. 192.168.0.0/16')
    .option('--peer-network <network>', "the peer: a network of the project's, by name or ID")
    .option('--peer-instance <instance>', "the peer: an instance of the project's, by name or ID")
    .option('--description <text>', 'what the rule is for')
    .action(async (options: CreateFlags, command: Command) => {
      const body = createBody(options)
      const context = await contextOf(command)
      show(context, await context.api.change<FirewallRule>('POST', `${context.project}/firewall-rules`, body), firewallRuleDetail)
    })

  rules.command('delete')
    .description('delete a firewall rule')
    .argument(RULE, RULE_HELP)
    .action(async (rule: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      await context.api.change('DELETE', `${context.project}/firewall-rules/${encodeURIComponent(rule)}`)
      show(context, { deleted: rule }, () => `deleted firewall rule ${rule}`)
    })
}
