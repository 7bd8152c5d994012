/**
 * Prometheus metrics at `GET /metrics` (fastify-metrics on prom-client): request counts and
 * durations by route and status (`http_request_duration_seconds`, whose `_count` is the count),
 * and Node's process metrics. Public like `/healthz`: it names no instance and changes nothing.
 * Registered before the routes, since it instruments each route as it is added. Each API keeps
 * its metrics in a registry of its own rather than prom-client's global one, so two APIs in one
 * process (the replicas of test/api/shared-rate-limit.test.ts) do not register them twice.
 */
import fp from 'fastify-plugin'
import fastifyMetricsModule from 'fastify-metrics'
import { Registry } from 'prom-client'

// A CommonJS module whose plugin is `exports.default`; from ESM that is the import's `default`.
const fastifyMetrics = fastifyMetricsModule.default

export default fp(async (fastify) => {
  const registry = new Registry()
  await fastify.register(fastifyMetrics, {
    defaultMetrics: { enabled: true, register: registry },
    // Scrapes every few seconds would drown the request log.
    endpoint: { url: '/metrics', method: 'GET', logLevel: 'warn', schema: { hide: true }, handler: () => {} },
    routeMetrics: {
      enabled: { histogram: true, summary: false },
      // Unknown URLs are one label, not one series each.
      registeredRoutesOnly: true,
      routeBlacklist: ['/metrics'],
      // The summary is made even when disabled: it goes to the registry too, unused.
      overrides: { histogram: { registers: [registry] }, summary: { registers: [registry] } }
    }
  })
}, { name: 'metrics' })
