/**
 * The agent's routes for what VMMs use beside their process: the image catalog, the storage
 * directory, the TAP devices and the networks' segments. The control plane reads them to list images, and the reconciler
 * to find and reap what no record owns (I3); removing something a live VMM on this host uses is
 * refused (409).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod'
import {
  baseImageListSchema,
  diskParamsSchema,
  partialParamsSchema,
  removedSchema,
  seedParamsSchema,
  segmentListSchema,
  segmentParamsSchema,
  storageListingSchema,
  tapListSchema,
  tapParamsSchema
} from '../../domain/host-agent-api.js'
import type { Supervisor } from '../supervisor/supervisor.js'

export const deviceRoutes: FastifyPluginAsyncZod<{ supervisor: Supervisor }> = async (app, { supervisor }) => {
  const { images, storage } = supervisor.devices
  const removed = { 200: removedSchema }

  app.get('/v1/images', { schema: { response: { 200: baseImageListSchema } } }, async () => ({ items: await images.catalog() }))

  app.get('/v1/storage', { schema: { response: { 200: storageListingSchema } } }, async () => await storage.list())

  app.delete('/v1/storage/disks/:id', { schema: { params: diskParamsSchema, response: removed } }, async (request) => {
    return { removed: await supervisor.removeDisk(request.params.id) }
  })

  app.delete('/v1/storage/seeds/:instanceId', { schema: { params: seedParamsSchema, response: removed } }, async (request) => {
    return { removed: await supervisor.removeSeed(request.params.instanceId) }
  })

  app.delete('/v1/storage/partial/:name', { schema: { params: partialParamsSchema, response: removed } }, async (request) => {
    return { removed: await storage.removePartial(request.params.name) }
  })

  app.get('/v1/taps', { schema: { response: { 200: tapListSchema } } }, async () => ({ items: await supervisor.taps() }))

  app.delete('/v1/taps/:name', { schema: { params: tapParamsSchema, response: removed } }, async (request) => {
    return { removed: await supervisor.removeTap(request.params.name) }
  })

  app.get('/v1/segments', { schema: { response: { 200: segmentListSchema } } }, async () => ({ items: await supervisor.devices.segments.list() }))

  app.delete('/v1/segments/:vni', { schema: { params: segmentParamsSchema, response: removed } }, async (request) => {
    const { segments, firewall } = supervisor.devices
    const gone = await segments.removeIfUnused(request.params.vni)
    // The firewall is replaced whether or not: the reconciler's pass over the host leaves it as the host is.
    await firewall.rebuild({ force: true })
    return { removed: gone }
  })
}
