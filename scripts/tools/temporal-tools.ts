/**
 * The Temporal command-line tools the stack and its operators use: `temporal` (the CLI, which
 * also runs the dev server with its Web UI) and `tctl` (the older operator CLI).
 *
 * Each comes from the environment when it is there, else it is built from its Go module into
 * `.tools/bin` once, at the version pinned in `scripts/tools/versions.json`. A built binary that
 * reports the pinned version is kept, so every later start only pays for one `--version` call.
 */
import { execFile, spawn } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'
import { z } from 'zod'
import { REPO_ROOT, TOOLS_BIN_DIR, findOnPath, isExecutable } from './paths.js'

const execFileAsync = promisify(execFile)

const goToolSchema = z.object({
  module: z.string(),
  package: z.string(),
  version: z.string().regex(/^v\d+\.\d+\.\d+$/),
  /** The Go variable that holds the version string; `go install` leaves it at `0.0.0-DEV` otherwise. */
  versionLdflag: z.string().optional()
})
type GoTool = z.infer<typeof goToolSchema>

const versionsSchema = z.object({ temporal: goToolSchema, tctl: goToolSchema })

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
  const versions = versionsSchema.parse(
    JSON.parse(await readFile(join(REPO_ROOT, 'scripts', 'tools', 'versions.json'), 'utf8'))
  )
  const temporal = options.temporalCli ??
    await findOnPath('temporal') ??
    await ensureBuilt('temporal', versions.temporal, goInstall, options.log)
  // tctl is for operators; nothing in the stack needs it, so without it the stack still runs.
  const tctl = await findOnPath('tctl') ??
    await ensureBuilt('tctl', versions.tctl, goBuildFromModuleCopy, options.log).catch((error: Error) => {
      options.log(`tctl is not available: ${error.message}`)
      return null
    })
  return { temporal, tctl }
}

type Builder = (tool: GoTool, output: string) => Promise<void>

async function ensureBuilt (name: string, tool: GoTool, build: Builder, log: (message: string) => void): Promise<string> {
  const output = join(TOOLS_BIN_DIR, name)
  const wanted = bareVersion(tool)
  const found = await reportedVersion(output)
  if (found === wanted) return output

  if (await findOnPath('go') === null) {
    throw new Error(
      `${name} ${tool.version} has to be built from ${tool.module}, but there is no \`go\` on PATH: ` +
      'install Go >= 1.25, or put a `temporal` and a `tctl` binary on PATH'
    )
  }
  await mkdir(TOOLS_BIN_DIR, { recursive: true })
  log(`building ${name} ${tool.version} from ${tool.package} into ${relative(REPO_ROOT, output)} ` +
    `(${found === null ? 'first build' : `found version ${found}`}; this takes a few minutes)`)
  const started = Date.now()
  await build(tool, output)
  const built = await reportedVersion(output)
  if (built !== wanted) {
    throw new Error(`${output} reports version ${built ?? '(none)'} after the build, expected ${wanted}`)
  }
  log(`built ${name} ${tool.version} in ${Math.round((Date.now() - started) / 1000)} s`)
  return output
}

/** The version a binary prints with `--version` (`temporal version 1.5.1 (Server …)`), or null. */
async function reportedVersion (binary: string): Promise<string | null> {
  if (!await isExecutable(binary)) return null
  try {
    const { stdout } = await execFileAsync(binary, ['--version'], { timeout: 30_000 })
    return /\bversion (\S+)/.exec(stdout)?.[1] ?? null
  } catch {
    return null
  }
}

/** `1.5.1` for `v1.5.1`: how the binaries print their version. */
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

/** The ordinary way: `go install module/cmd@version` into `.tools/bin`. */
async function goInstall (tool: GoTool, output: string): Promise<void> {
  await run('go', ['install', '-trimpath', '-ldflags', ldflags(tool), `${tool.package}@${tool.version}`], {
    env: { ...GO_ENV, GOBIN: join(output, '..') }
  })
}

/**
 * `go install tctl@v1.18.0` fails here: before it builds, it asks the module proxy for the list
 * of versions to check whether the module is deprecated, and this proxy answers that request
 * (`…/@v/list`) with 403 while it does serve the v1.18.0 module itself. So fetch the module with
 * `go mod download`, build its main package inside a writable copy (the module cache is
 * read-only, and the build may need to touch go.sum), and move the binary into place.
 */
async function goBuildFromModuleCopy (tool: GoTool, output: string): Promise<void> {
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

function run (command: string, args: string[], options: { env: NodeJS.ProcessEnv, cwd?: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'inherit', 'inherit'] })
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      if (code === 0) resolve()
      else reject(new Error(`${command} ${args.join(' ')} failed with ${signal ?? `exit code ${code}`}`))
    })
  })
}
