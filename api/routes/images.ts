/** `/v1/images`: the base disk images the hosts announce (db/images.ts), for boot disks. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import { listImages } from '../../db/images.js'
import { imageListSchema } from '../schemas/images.js'

const routes: FastifyPluginAsyncZod = async (fastify) => {
  fastify.get('/images', {
    config: { action: 'images.read' },
    schema: {
      tags: ['images'],
      summary: 'List the base images: format, virtual size, checksum and the hosts that have them; one entry per name and version',
      response: { 200: imageListSchema }
    }
  }, async () => ({ items: await listImages(fastify.db) }))
}

export default routes
