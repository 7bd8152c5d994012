/**
 * Where this host's migration targets listen (`VMPLANE_MIGRATION_LISTEN`, config/index.ts).
 *
 * A target's receiver URL is chosen when its VMM is ensured and recorded in its record before
 * `vm.receive-migration` is issued (I3): a restarted agent issues the receive again at the same
 * URL, and the control plane hands the URL from the target's report to the source's send.
 *
 * - `unix:<dir>`: `<dir>/<migrationId>.sock`, unique by the migration's ID. Only for hosts that
 *   share one machine's kernel (tests, the dev stack): a Unix socket on a shared filesystem does
 *   not reach across machines. The directory is made at start-up; a socket left by an earlier
 *   attempt is removed before the receive binds it, and after the target is done with it.
 * - `tcp:<address>:<first>-<last>`: a port of the range that no target of this agent still
 *   receiving holds, looked for from a place the migration's ID picks, so that retries spread. The range is kept
 *   for migrations: the agent cannot see ports taken in the VMMs' network namespace, and a port
 *   something else holds fails that receive (its bind), which the control plane retries with a new
 *   migration.
 */
import { createHash } from 'node:crypto'
import { mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { MigrationListen } from '../../config/index.js'
import { unavailable } from '../errors.js'
import { StartupError } from '../state-dir.js'

const MAX_SOCKET_PATH_BYTES = 107
const SOCKET_NAME = '00000000-0000-0000-0000-000000000000.sock'

export class MigrationTransport {
  constructor (readonly listen: MigrationListen) {}

  /** Checks the setting and makes the socket directory; a directory too long for a socket is refused. */
  async init (): Promise<void> {
    if (this.listen.kind !== 'unix') return
    const longest = Buffer.byteLength(join(this.listen.dir, SOCKET_NAME))
    if (longest > MAX_SOCKET_PATH_BYTES) {
      throw new StartupError(`VMPLANE_MIGRATION_LISTEN's directory is too long: migration sockets in it would take ${longest} bytes, ` +
        `more than the ${MAX_SOCKET_PATH_BYTES} a Unix socket path may have`)
    }
    await mkdir(this.listen.dir, { recursive: true, mode: 0o700 })
  }

  /** Where the target of `migrationId` listens: not one of `taken`, the URLs targets still receiving hold. */
  receiverUrl (migrationId: string, taken: ReadonlySet<string>): string {
    if (this.listen.kind === 'unix') return `unix:${join(this.listen.dir, `${migrationId}.sock`)}`
    const { address, firstPort, lastPort } = this.listen
    const ports = lastPort - firstPort + 1
    const start = createHash('sha256').update(migrationId).digest().readUInt32BE(0) % ports
    for (let i = 0; i < ports; i++) {
      const url = `tcp:${address}:${firstPort + (start + i) % ports}`
      if (!taken.has(url)) return url
    }
    throw unavailable(`every migration port of ${firstPort}-${lastPort} is held by a target still receiving; retry once one is done`)
  }

  /** Removes what a receive at `receiverUrl` leaves behind: the socket file of a Unix one. */
  async clear (receiverUrl: string): Promise<void> {
    if (receiverUrl.startsWith('unix:')) await rm(receiverUrl.slice('unix:'.length), { force: true })
  }
}
