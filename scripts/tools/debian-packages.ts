/**
 * Installs Debian packages that a test or the dev stack needs, with apt-get, as root. The
 * package lists are refreshed first: a fresh container has none, and old ones name versions the
 * mirror no longer has. Without recommended packages: only what the programs need.
 */
import { findOnPath, run } from './paths.js'

export async function installDebianPackages (packages: readonly string[], why: string, log: (message: string) => void): Promise<void> {
  const manual = `install Debian's ${packages.map((p) => `\`${p}\``).join(', ')} (apt-get install ${packages.join(' ')})`
  if (await findOnPath('apt-get') === null) throw new Error(`${why} is missing and there is no apt-get here: ${manual}`)
  if (process.getuid?.() !== 0) throw new Error(`${why} is missing and installing it with apt-get needs root: ${manual}`)
  log(`installing ${why} (apt-get install ${packages.join(' ')}; this takes a minute or two)`)
  const started = Date.now()
  await apt(['update'])
  await apt(['install', '--yes', '--no-install-recommends', ...packages])
  log(`installed ${why} in ${Math.round((Date.now() - started) / 1000)} s`)
}

/**
 * The program (or library) `find` finds, after installing Debian's package of it if it finds
 * none. Once it is there, each run only pays for the lookup.
 */
export async function ensureDebianProgram (
  find: () => Promise<string | null>,
  debianPackage: string,
  why: string,
  log: (message: string) => void
): Promise<string> {
  const found = await find()
  if (found !== null) return found
  await installDebianPackages([debianPackage], why, log)
  const installed = await find()
  if (installed === null) throw new Error(`apt-get installed ${debianPackage}, yet ${why} cannot be found`)
  return installed
}

function apt (args: string[]): Promise<void> {
  return run('apt-get', args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
}
