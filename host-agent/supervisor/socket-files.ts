/**
 * A VMM leaves its API socket and the socket's lock file behind when it is killed. Cloud
 * Hypervisor v53+ cleans a stale socket up itself on the next start, but ≤v52 fails to bind,
 * and a directory full of dead sockets misleads people; the agent removes both once the process
 * is gone.
 */
import { rm } from 'node:fs/promises'

export async function removeSocketFiles (apiSocket: string): Promise<void> {
  await Promise.all([rm(apiSocket, { force: true }), rm(`${apiSocket}.lock`, { force: true })])
}
