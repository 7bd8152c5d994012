/** `vmplane hosts list|cordon|drain|uncordon`: the hosts, their status and capacity; drain one for maintenance. */
import type { Command } from 'commander'
import type { Host, HostList } from '../api-types.js'
import { wholeNumber } from '../arguments.js'
import { contextOf, show } from '../context.js'
import { hostTable } from '../views.js'

export function addHostCommands (program: Command): void {
  const hosts = program.command('hosts').description('the hypervisor hosts')

  hosts.command('list')
    .description('list hosts with their status, scheduling (cordoned, draining), reserved capacity and live VMMs')
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<HostList>('/v1/hosts'), (list) => hostTable(list.items))
    })

  hosts.command('drain')
    .description('cordon the host, then live-migrate every instance running on it to other hosts')
    .argument('<host>', 'the host ID')
    .option('--concurrency <n>', 'migrations in flight at once', wholeNumber, 3)
    .action(async (host: string, options: { concurrency: number }, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.change<Host>('POST', `/v1/hosts/${encodeURIComponent(host)}/drain`, { concurrency: options.concurrency }), (h) => hostTable([h]))
    })

  hosts.command('cordon')
    .description('no new VMM is placed on the host; what runs there stays')
    .argument('<host>', 'the host ID')
    .action(async (host: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.change<Host>('POST', `/v1/hosts/${encodeURIComponent(host)}/cordon`), (h) => hostTable([h]))
    })

  hosts.command('uncordon')
    .description('the host takes new VMMs again; a drain in progress stops')
    .argument('<host>', 'the host ID')
    .action(async (host: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.change<Host>('POST', `/v1/hosts/${encodeURIComponent(host)}/uncordon`), (h) => hostTable([h]))
    })
}
