/** `vmplane hosts list`: every host, its status, what is reserved of its capacity, its live VMMs. */
import type { Command } from 'commander'
import type { HostList } from '../api-types.js'
import { contextOf, show } from '../context.js'
import { hostTable } from '../views.js'

export function addHostCommands (program: Command): void {
  const hosts = program.command('hosts').description('the hypervisor hosts')

  hosts.command('list')
    .description('list hosts with their status, reserved capacity and live VMMs')
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<HostList>('/v1/hosts'), (list) => hostTable(list.items))
    })
}
