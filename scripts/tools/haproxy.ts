/**
 * HAProxy, Debian's `haproxy` package: the load balancer the dev stack puts in front of its API
 * replicas (stack/api-balancer.ts). `ensureHaproxy()` installs it with apt-get when it
 * is missing; `npm test` calls it before the tests, the dev stack when it runs more than one API.
 */
import { ensureDebianProgram } from './debian-packages.js'
import { findOnPath, isExecutable } from './paths.js'

/** Where Debian's package puts it, for a PATH that leaves /usr/sbin out. */
const DEBIAN_HAPROXY = '/usr/sbin/haproxy'

export async function findHaproxy (): Promise<string | null> {
  return await findOnPath('haproxy') ?? (await isExecutable(DEBIAN_HAPROXY) ? DEBIAN_HAPROXY : null)
}

export async function ensureHaproxy (options: { log: (message: string) => void }): Promise<string> {
  return await ensureDebianProgram(findHaproxy, 'haproxy', 'HAProxy', options.log)
}
