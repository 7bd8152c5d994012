/**
 * Tools built from their Go modules into `.tools/bin`, at the versions pinned in
 * `scripts/tools/versions.json`: the Temporal CLIs and, for the stack's cluster shape, Temporal's
 * own server, its SQL schema tool and its Web UI's server (temporal-tools.ts), and Docker Compose
 * (compose.ts). A built binary that reports the pinned version is kept, so every later run only
 * pays for one `--version` call.
 */
import { execFile } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join, relative } from 'node:path'
import { promisify } from 'node:util'
import { z } from 'zod'
import { REPO_ROOT, TOOLS_BIN_DIR, findOnPath, isExecutable, run } from './paths.js'

const execFileAsync = promisify(execFile)

const goToolSchema = z.object({
  module: z.string(),
  package: z.string(),
  version: z.string().regex(/^v\d+\.\d+\.\d+$/),
  /** The Go variable that holds the version string; `go install` leaves it at `0.0.0-DEV` otherwise. */
  versionLdflag: z.string().optional()
})
export type GoTool = z.infer<typeof goToolSchema>

const versionsSchema = z.object({
  temporal: goToolSchema,
  tctl: goToolSchema,
  compose: goToolSchema,
  temporalServer: goToolSchema,
  temporalSqlTool: goToolSchema,
  temporalUi: goToolSchema
})

export async function pinnedVersions (): Promise<z.infer<typeof versionsSchema>> {
  return versionsSchema.parse(JSON.parse(await readFile(join(REPO_ROOT, 'scripts', 'tools', 'versions.json'), 'utf8')))
}

export type Builder = (tool: GoTool, output: string) => Promise<void>

export interface BuildOptions {
  log: (message: string) => void
  /** What else gives the tool, for the error when it cannot be built: "put a `tctl` on PATH". */
  alternative: string
}

/** The path of `.tools/bin/<name>` once it reports the pinned version, building it first if need be. */
export async function ensureBuilt (name: string, tool: GoTool, build: Builder, options: BuildOptions): Promise<string> {
  const output = builtPath(name)
  const found = await reportedVersion(output)
  if (found === bareVersion(tool)) return output

  if (await findOnPath('go') === null) {
    throw new Error(
      `${name} ${tool.version} has to be built from ${tool.module}, but there is no \`go\` on PATH: ` +
      `install Go >= 1.25, or ${options.alternative}`
    )
  }
  await mkdir(TOOLS_BIN_DIR, { recursive: true })
  options.log(`building ${name} ${tool.version} from ${tool.package} into ${relative(REPO_ROOT, output)} ` +
    `(${found === null ? 'first build' : `found version ${found}`}; this takes a few minutes)`)
  const started = Date.now()
  await build(tool, output)
  const built = await reportedVersion(output)
  if (built !== bareVersion(tool)) {
    throw new Error(`${output} reports version ${built ?? '(none)'} after the build, expected ${bareVersion(tool)}`)
  }
  options.log(`built ${name} ${tool.version} in ${Math.round((Date.now() - started) / 1000)} s`)
  return output
}

/** The path of `.tools/bin/<name>` if it is there at the pinned version, without building it. */
export async function builtAtVersion (name: string, tool: GoTool): Promise<string | null> {
  const output = builtPath(name)
  return await reportedVersion(output) === bareVersion(tool) ? output : null
}

function builtPath (name: string): string {
  return join(TOOLS_BIN_DIR, name)
}

/**
 * The version a binary prints with `--version` (or `args`), without a leading `v`: `1.5.1` from
 * `temporal version 1.5.1 (Server …)`, `2.40.3` from `Docker Compose version v2.40.3`; or null.
 */
export async function reportedVersion (binary: string, args = ['--version']): Promise<string | null> {
  if (!await isExecutable(binary)) return null
  try {
    const { stdout } = await execFileAsync(binary, args, { timeout: 30_000 })
    return /\bversion v?(\d[\w.+-]*)/.exec(stdout)?.[1] ?? null
  } catch {
    return null
  }
}

/** `1.5.1` for `v1.5.1`. */
function bareVersion (tool: GoTool): string {
  return tool.version.replace(/^v/, '')
}

function ldflags (tool: GoTool): string {
  const flags = ['-s', '-w']
  if (tool.versionLdflag !== undefined) flags.push('-X', `${tool.versionLdflag}=${bareVersion(tool)}`)
  return flags.join(' ')
}

/** Pure-Go builds (the dev server's SQLite driver is transpiled Go), so no C toolchain is needed. */
const GO_ENV = { ...process.env, CGO_ENABLED: '0' }

/**
 * The ordinary way: `go install module/cmd@version`. Go names the binary after its package's
 * directory (`server` for go.temporal.io/server/cmd/server), so it is installed into a directory
 * of its own next to the target and renamed into place: a binary in .tools/bin is always a whole
 * one, under the name the stack looks for.
 */
export async function goInstall (tool: GoTool, output: string): Promise<void> {
  const installDir = await mkdtemp(`${output}.install-`)
  try {
    await run('go', ['install', '-trimpath', '-ldflags', ldflags(tool), `${tool.package}@${tool.version}`], {
      env: { ...GO_ENV, GOBIN: installDir }
    })
    await rename(join(installDir, basename(tool.package)), output)
  } finally {
    await rm(installDir, { recursive: true, force: true })
  }
}

/**
 * For modules `go install module/cmd@version` refuses: tctl, because before it builds, it asks
 * the module proxy for the list of versions to check whether the module is deprecated, and this
 * proxy answers that request (`…/@v/list`) with 403 while it does serve the v1.18.0 module
 * itself; Docker Compose, because its go.mod has `exclude` directives, which `go install`
 * rejects outside the main module. So fetch the module with `go mod download`, build its main
 * package inside a writable copy (the module cache is read-only, and the build may need to
 * touch go.sum), and move the binary into place.
 */
export async function goBuildFromModuleCopy (tool: GoTool, output: string): Promise<void> {
  const { stdout } = await execFileAsync('go', ['mod', 'download', '-json', `${tool.module}@${tool.version}`], {
    env: GO_ENV,
    maxBuffer: 1024 * 1024
  })
  const moduleDir = z.object({ Dir: z.string() }).parse(JSON.parse(stdout)).Dir
  const workDir = await mkdtemp(join(tmpdir(), `vmplane-${tool.module.split('/').pop() ?? 'go'}-`))
  try {
    const sourceDir = join(workDir, 'src')
    await cp(moduleDir, sourceDir, { recursive: true })
    await makeWritable(sourceDir)
    // Build next to the target and rename, so a binary in .tools/bin is always a whole one.
    const partial = `${output}.partial`
    const mainPackage = `./${relative(tool.module, tool.package)}`
    await run('go', ['build', '-trimpath', '-ldflags', ldflags(tool), '-o', partial, mainPackage], {
      env: GO_ENV,
      cwd: sourceDir
    })
    await rename(partial, output)
  } finally {
    await rm(workDir, { recursive: true, force: true })
  }
}

async function makeWritable (dir: string): Promise<void> {
  await execFileAsync('chmod', ['-R', 'u+w', dir])
}
