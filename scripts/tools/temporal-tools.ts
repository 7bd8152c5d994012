/**
 * The Temporal command-line tools the stack and its operators use: `temporal` (the CLI, which
 * also runs the dev server with its Web UI) and `tctl` (the older operator CLI).
 *
 * Each comes from the environment when it is there, else it is built from its Go module into
 * `.tools/bin` once (go-tools.ts).
 */
import { ensureBuilt, goBuildFromModuleCopy, goInstall, pinnedVersions } from './go-tools.js'
import { findOnPath } from './paths.js'

export interface TemporalTools {
  temporal: string
  tctl: string | null
}

export interface ToolOptions {
  /** `TEMPORAL_CLI`: a `temporal` binary to use as it is. */
  temporalCli?: string | null
  log: (message: string) => void
}

export async function ensureTemporalTools (options: ToolOptions): Promise<TemporalTools> {
  const versions = await pinnedVersions()
  const build = { log: options.log, alternative: 'put a `temporal` and a `tctl` binary on PATH' }
  const temporal = options.temporalCli ??
    await findOnPath('temporal') ??
    await ensureBuilt('temporal', versions.temporal, goInstall, build)
  // tctl is for operators; nothing in the stack needs it, so without it the stack still runs.
  const tctl = await findOnPath('tctl') ??
    await ensureBuilt('tctl', versions.tctl, goBuildFromModuleCopy, build).catch((error: Error) => {
      options.log(`tctl is not available: ${error.message}`)
      return null
    })
  return { temporal, tctl }
}
