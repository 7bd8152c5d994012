/**
 * The browser the Temporal UI test drives: Debian's `chromium` package, run headless by
 * playwright-core (which brings no browser of its own).
 *
 * `findChromium()` only looks; `ensureChromium()`, which `npm test` calls before the tests,
 * installs the package with apt-get when it is missing. Once it is there, each run only pays
 * for a lookup on PATH.
 */
import { findOnPath, isExecutable, run } from './paths.js'

/** Where Debian's package puts it, for a PATH that leaves /usr/bin out. */
const DEBIAN_CHROMIUM = '/usr/bin/chromium'
const PACKAGE = 'chromium'

export async function findChromium (): Promise<string | null> {
  return await findOnPath('chromium') ?? (await isExecutable(DEBIAN_CHROMIUM) ? DEBIAN_CHROMIUM : null)
}

export async function ensureChromium (options: { log: (message: string) => void }): Promise<string> {
  const found = await findChromium()
  if (found !== null) return found

  const manual = `install Debian's \`${PACKAGE}\` package (apt-get install ${PACKAGE}), or put a \`chromium\` on PATH`
  if (await findOnPath('apt-get') === null) throw new Error(`Chromium is missing and there is no apt-get here: ${manual}`)
  if (process.getuid?.() !== 0) throw new Error(`Chromium is missing and installing it with apt-get needs root: ${manual}`)

  options.log(`installing Chromium (apt-get install ${PACKAGE}; this takes a minute or two)`)
  const started = Date.now()
  // The package lists may be missing or stale (a fresh container has none), so refresh them first.
  await apt(['update'])
  // Without the recommended packages: no notification daemon, no sandbox helper (Chromium runs
  // unsandboxed as root anyway); fontconfig's own dependency brings a font for the screenshots.
  await apt(['install', '--yes', '--no-install-recommends', PACKAGE])
  const installed = await findChromium()
  if (installed === null) throw new Error(`apt-get installed ${PACKAGE}, yet there is no \`chromium\` on PATH or at ${DEBIAN_CHROMIUM}`)
  options.log(`installed Chromium in ${Math.round((Date.now() - started) / 1000)} s`)
  return installed
}

function apt (args: string[]): Promise<void> {
  return run('apt-get', args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
}
