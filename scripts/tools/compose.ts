/**
 * Docker Compose, for the test that checks docker-compose.yml with `docker compose config`
 * (which reads and renders the file; it needs no Docker engine).
 *
 * The Compose v2 of the environment when there is one (the `docker compose` plugin, or a
 * standalone `docker-compose` v2), else the pinned version built into `.tools/bin` (go-tools.ts).
 * Debian's `docker-compose` package is Compose v1, end of life and not the Compose that runs the
 * file elsewhere, so it is passed over.
 */
import { builtAtVersion, ensureBuilt, goBuildFromModuleCopy, pinnedVersions, reportedVersion } from './go-tools.js'
import { findOnPath } from './paths.js'

/** How to run Compose: the command, then the arguments that come before Compose's own. */
export interface ComposeCommand {
  command: string
  args: string[]
}

export async function findCompose (): Promise<ComposeCommand | null> {
  const docker = await findOnPath('docker')
  if (docker !== null && isV2(await reportedVersion(docker, ['compose', 'version']))) return { command: docker, args: ['compose'] }
  const standalone = await findOnPath('docker-compose')
  if (standalone !== null && isV2(await reportedVersion(standalone))) return { command: standalone, args: [] }
  const built = await builtAtVersion('docker-compose', (await pinnedVersions()).compose)
  return built === null ? null : { command: built, args: [] }
}

export async function ensureCompose (options: { log: (message: string) => void }): Promise<ComposeCommand> {
  const found = await findCompose()
  if (found !== null) return found
  const built = await ensureBuilt('docker-compose', (await pinnedVersions()).compose, goBuildFromModuleCopy, {
    log: options.log,
    alternative: 'install the Docker Compose v2 plugin'
  })
  return { command: built, args: [] }
}

/** Compose v2 or later (v5 is the newest line), by the version it reports. */
function isV2 (version: string | null): boolean {
  return version !== null && Number(version.split('.')[0]) >= 2
}
