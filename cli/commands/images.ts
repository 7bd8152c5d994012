/** `vmplane images list`: the base images boot disks are made from, and the hosts that have them. */
import type { Command } from 'commander'
import type { ImageList } from '../api-types.js'
import { contextOf, show } from '../context.js'
import { imageTable } from '../views.js'

export function addImageCommands (program: Command): void {
  const images = program.command('images').description('the base disk images the hosts have')

  images.command('list')
    .description('list base images: format, virtual size, checksum and the hosts that have each')
    .action(async (_options: unknown, command: Command) => {
      const context = await contextOf(command)
      show(context, await context.api.get<ImageList>('/v1/images'), (list) => imageTable(list.items))
    })
}
