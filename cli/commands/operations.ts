/** `vmplane operations get <id>`: an accepted request and its outcome. */
import type { Command } from 'commander'
import type { Operation } from '../api-types.js'
import { contextOf, show } from '../context.js'
import { operationDetail } from '../views.js'

export function addOperationCommands (program: Command): void {
  const operations = program.command('operations').description('accepted requests and their outcomes')

  operations.command('get')
    .description('show an operation: its kind, status, error and timing')
    .argument('<id>', 'the operation ID (create, start, stop, reboot and delete print it)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<Operation>(`${context.project}/operations/${encodeURIComponent(id)}`), operationDetail)
    })
}
