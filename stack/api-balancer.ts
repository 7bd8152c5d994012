/**
 * The one address in front of the API replicas: HAProxy (Debian's), run by the stack when it
 * runs more than one API, listening on the API port. Its configuration is written into the data
 * directory at every start (`haproxy.cfg`), from the replicas this start runs.
 *
 * - Health: each replica's `/healthz` every second; two failures take it out, one success brings
 *   it back. Not `/readyz`: that fails on every replica at once when Temporal or the workers are
 *   away, and reads, which need only PostgreSQL, would then be refused for nothing.
 * - Failover: a request whose connection to a replica fails is sent to another (`retries`,
 *   `option redispatch`). One whose replica died before answering is sent again too
 *   (`empty-response`), unless it is a change without an Idempotency-Key: with a key, the API
 *   answers a repeat with what the first attempt did; without one, a repeat could do it twice.
 * - Waits: `?wait=` holds an answer up to 300 s, so the server and client timeouts are longer.
 *   A WebSocket (the serial console) is a tunnel once upgraded, open up to an hour of silence.
 * - Balance: the replica with the fewest requests in progress, since held waits make some long.
 * - Idle connections: HAProxy passes on the API's `Keep-Alive: timeout=72`, so clients reuse an
 *   idle connection for that long. HAProxy keeps one longer than that: closing it sooner (its
 *   default is `timeout http-request`, 10 s) races a client's next request on it, which then
 *   fails with nothing sent ("fetch failed": 5 of 100 operations in one cluster benchmark).
 */
import { writeFile } from 'node:fs/promises'
import { API_KEEP_ALIVE_SECONDS } from '../api/server.js'
import { LIMITS } from '../domain/limits.js'
import type { Replica } from './components.js'
import type { ComponentSpec } from './supervisor.js'

export const BALANCER_COMPONENT = 'haproxy'

/** Longer than the longest `?wait=`, with room for the request's own work. */
const HELD_ANSWER_SECONDS = LIMITS.waitSeconds.max + 30

/**
 * Where HAProxy listens and the replicas it sends to: the dev stack's, on loopback; Compose's
 * (config/haproxy.cfg), every `vmplane-api` replica Docker's DNS names.
 */
interface BalancerTargets {
  /** Who wrote the file, for its first line. */
  origin: string
  bind: string
  /** A `resolvers` section, when the servers are found by name. */
  resolvers?: string
  servers: string[]
}

export function balancerConfig ({ origin, bind, resolvers, servers }: BalancerTargets): string {
  return `# ${origin}
global
  # Request lines (retries, failovers, errors) only: HAProxy prints servers going up and down itself.
  log stdout format raw local0 info info
  maxconn 4096
${resolvers === undefined ? '' : `\n${resolvers}\n`}
defaults
  mode http
  log global
  option httplog
  # Retries, failovers and errors only: a line per request would drown the log.
  option dontlog-normal
  timeout connect 1s
  timeout http-request 10s
  timeout http-keep-alive ${API_KEEP_ALIVE_SECONDS + 5}s
  timeout client ${HELD_ANSWER_SECONDS}s
  timeout server ${HELD_ANSWER_SECONDS}s
  timeout tunnel 1h
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response

frontend api
  bind ${bind}
  default_backend apis

backend apis
  balance leastconn
  option httpchk GET /healthz
  http-check expect status 200
  http-request disable-l7-retry if { method POST DELETE } !{ req.hdr(idempotency-key) -m found }
  default-server check inter 1s fall 2 rise 1
${servers.map((server) => `  ${server}`).join('\n')}
`
}

/** The dev stack's: on the API port of loopback, in front of the replicas this start runs. */
export function stackBalancerConfig (port: number, apis: readonly Replica[]): string {
  return balancerConfig({
    origin: 'Written by the dev stack (stack/api-balancer.ts) at each start: edits are lost.',
    bind: `127.0.0.1:${port}`,
    servers: apis.map((api) => `server ${api.component} 127.0.0.1:${api.port}`)
  })
}

/**
 * docker-compose.yml's (config/haproxy.cfg, which a test holds equal to this): on the API's port
 * in its container, in front of the `vmplane-api` replicas, found through Docker's DNS (up to
 * COMPOSE_API_SLOTS of them; a slot without a replica is down, not an error).
 */
export const COMPOSE_API_SLOTS = 4
export function composeBalancerConfig (): string {
  return balancerConfig({
    origin: 'HAProxy in front of docker-compose.yml\'s API replicas: stack/api-balancer.ts makes it (a test holds it equal).',
    bind: '*:8080',
    resolvers: 'resolvers docker\n  nameserver dns 127.0.0.11:53\n  hold valid 5s',
    servers: [`server-template api ${COMPOSE_API_SLOTS} vmplane-api:8080 resolvers docker init-addr none`]
  })
}

/** Writes the configuration and says how to run HAProxy on it, in the foreground. */
export async function balancerSpec (haproxy: string, configFile: string, port: number, apis: readonly Replica[], env: NodeJS.ProcessEnv): Promise<ComponentSpec> {
  await writeFile(configFile, stackBalancerConfig(port, apis))
  return { name: BALANCER_COMPONENT, command: haproxy, args: ['-db', '-f', configFile], env }
}
