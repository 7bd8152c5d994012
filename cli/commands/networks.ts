/** `vmplane networks list|get|create|delete`: the project's address spaces, which its instances' interfaces are on. */
import type { Command } from 'commander'
import type { Network, NetworkList } from '../api-types.js'
import { contextOf, show } from '../context.js'
import { networkDetail, networkTable } from '../views.js'

const NETWORK = '<network>'
const NETWORK_HELP = 'the network, by name or ID'

export function addNetworkCommands (program: Command): void {
  const networks = program.command('networks').description("the networks instances' interfaces take addresses from")

  networks.command('list')
    .description('list networks with their ranges and the addresses in use')
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<NetworkList>(`${context.project}/networks`), (list) => networkTable(list.items))
    })

  networks.command('get')
    .description('show a network')
    .argument(NETWORK, NETWORK_HELP)
    .action(async (network: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<Network>(`${context.project}/networks/${encodeURIComponent(network)}`), networkDetail)
    })

  networks.command('create')
    .description('create a network: an IPv4 range no other network overlaps')
    .argument('<name>', 'lower-case letters, digits and dashes')
    .requiredOption('--cidr <cidr>', 'its range, e.g. 10.78.0.0/24 (a /16 to a /30)')
    .option('--gateway <address>', 'its gateway (default: the first address of the range)')
    .option('--outbound <way>', "its way out to the hosts' LAN: nat or none (default: none)")
    .action(async (name: string, options: { cidr: string, gateway?: string, outbound?: string }, command: Command) => {
      const context = await contextOf(command)
      const body = { name, cidr: options.cidr, gateway: options.gateway, outbound: options.outbound }
      show(context, await context.api.change<Network>('POST', `${context.project}/networks`, body), networkDetail)
    })

  networks.command('delete')
    .description('delete a network no live interface uses')
    .argument(NETWORK, NETWORK_HELP)
    .action(async (network: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      await context.api.change('DELETE', `${context.project}/networks/${encodeURIComponent(network)}`)
      show(context, { deleted: network }, () => `deleted network ${network}`)
    })
}
