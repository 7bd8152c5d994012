/**
 * The first steps of `npm start` and `npm test` on any checkout, fresh or not: install the
 * dependencies when node_modules is missing or older than package-lock.json, and build when a
 * source is newer than the last successful build. Plain Node without dependencies, because it
 * runs before they are installed.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Touched after each successful build, with the time the build started. */
const BUILD_STAMP = join(REPO_ROOT, 'dist', '.build-stamp')

/** Runs a command in the repository with the terminal's output; returns its exit status. */
export function run (command, args, env = process.env) {
  const result = spawnSync(command, args, { cwd: REPO_ROOT, stdio: 'inherit', env })
  if (result.error !== undefined) throw result.error
  return result.status ?? 1
}

function runOrExit (command, args) {
  const status = run(command, args)
  if (status !== 0) {
    console.error(`${command} ${args.join(' ')} failed (exit status ${status})`)
    process.exit(status)
  }
}

function mtimeMs (path) {
  return existsSync(path) ? statSync(path).mtimeMs : 0
}

export function ensureInstalled () {
  // npm rewrites this hidden lockfile on every install, so it dates the installed tree.
  const installed = mtimeMs(join(REPO_ROOT, 'node_modules', '.package-lock.json'))
  if (installed >= mtimeMs(join(REPO_ROOT, 'package-lock.json'))) return
  console.log(installed === 0 ? 'installing dependencies (npm ci)' : 'package-lock.json changed: reinstalling dependencies (npm ci)')
  const ci = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  if (ci.error !== undefined) throw ci.error
  if (ci.status === 0) {
    process.stdout.write(ci.stdout)
    return
  }
  // Its reason, without the usage text npm adds after it.
  console.log(ci.stderr.split('\nnpm error Clean install a project')[0])
  // npm ci refuses a lockfile that lacks an optional platform package of a dependency, and a
  // lockfile made where the registry does not serve every platform's build (@swc/core's for
  // other systems, here) lacks some. npm install takes the same locked versions and skips the
  // optional packages it cannot get; --no-save keeps it from rewriting the lockfile.
  console.log('npm ci refused the lockfile; installing the locked versions with npm install')
  runOrExit('npm', ['install', '--no-audit', '--no-fund', '--no-save'])
}

/** The newest modification time of any file below `path`. */
function newestMtimeMs (path) {
  const stat = statSync(path, { throwIfNoEntry: false })
  if (stat === undefined) return 0
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce((newest, name) => Math.max(newest, newestMtimeMs(join(path, name))), stat.mtimeMs)
}

/** Everything the build reads: the folders tsconfig.json compiles, and the build's own settings. */
function buildInputs () {
  const { include } = JSON.parse(readFileSync(join(REPO_ROOT, 'tsconfig.json'), 'utf8'))
  return [...include, 'tsconfig.json', 'package.json', 'package-lock.json'].map((name) => join(REPO_ROOT, name))
}

export function ensureBuilt () {
  const built = existsSync(join(REPO_ROOT, 'dist', 'stack', 'dev-stack.js')) ? mtimeMs(BUILD_STAMP) : 0
  const changed = Math.max(...buildInputs().map(newestMtimeMs))
  if (built >= changed) return
  console.log(built === 0 ? 'building (npm run build)' : 'sources changed since the last build: building (npm run build)')
  const started = new Date()
  runOrExit('npm', ['run', 'build'])
  // Dated to the build's start, so a file edited while it ran is seen as newer next time.
  writeFileSync(BUILD_STAMP, '')
  utimesSync(BUILD_STAMP, started, started)
}
