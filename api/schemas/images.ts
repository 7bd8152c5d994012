import { z } from 'zod'
import { baseImageSchema } from '../../domain/host-agent-api.js'

export const imageSchema = baseImageSchema.extend({
  hosts: z.array(z.string()).describe('the hosts (not declared lost) that have this version of the image')
}).meta({ id: 'Image' })

export const imageListSchema = z.object({ items: z.array(imageSchema) })
