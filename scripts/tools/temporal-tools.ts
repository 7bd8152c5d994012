/**
 * The Temporal command-line tools the stack and its operators use: `temporal` (the CLI, which
 * also runs the dev server with its Web UI) and `tctl` (the older operator CLI); and, for the
 * stack's cluster shape only, Temporal's own server, its SQL schema tool and the Web UI's server.
 *
 * The CLIs come from the environment when they are there, else they are built from their Go
 * modules into `.tools/bin` once (go-tools.ts). The cluster shape's binaries are always the
 * pinned builds: the tool's embedded schemas must be those of the server that runs on them, and
 * the UI is the one the CLI's dev server embeds and docker-compose.yml runs.
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

export interface TemporalServerTools {
  /** `temporal-server`: frontend, history, matching and worker services (cmd/server). */
  server: string
  /** `temporal-sql-tool`: creates and updates the server's PostgreSQL schemas (cmd/tools/sql). */
  sqlTool: string
  /** `temporal-ui-server`: the Web UI (ui-server's cmd/server), the dev server's built-in one standing alone. */
  ui: string
}

/** Built only when the cluster shape is asked for: the first build takes minutes. */
export async function ensureTemporalServer (options: { log: (message: string) => void }): Promise<TemporalServerTools> {
  const versions = await pinnedVersions()
  const build = { log: options.log, alternative: 'run the stack with the dev server (VMPLANE_TEMPORAL=dev)' }
  return {
    server: await ensureBuilt('temporal-server', versions.temporalServer, goInstall, build),
    sqlTool: await ensureBuilt('temporal-sql-tool', versions.temporalSqlTool, goInstall, build),
    ui: await ensureBuilt('temporal-ui-server', versions.temporalUi, goInstall, build)
  }
}
