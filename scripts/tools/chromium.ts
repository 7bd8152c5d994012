/**
 * The browser the Temporal UI test drives: Debian's `chromium` package, run headless by
 * playwright-core (which brings no browser of its own).
 *
 * `findChromium()` only looks; `ensureChromium()`, which `npm test` calls before the tests,
 * installs the package with apt-get when it is missing.
 */
import { ensureDebianProgram } from './debian-packages.js'
import { findOnPath, isExecutable } from './paths.js'

/** Where Debian's package puts it, for a PATH that leaves /usr/bin out. */
const DEBIAN_CHROMIUM = '/usr/bin/chromium'
const PACKAGE = 'chromium'

export async function findChromium (): Promise<string | null> {
  return await findOnPath('chromium') ?? (await isExecutable(DEBIAN_CHROMIUM) ? DEBIAN_CHROMIUM : null)
}

export async function ensureChromium (options: { log: (message: string) => void }): Promise<string> {
  // Without the recommended packages: no notification daemon, no sandbox helper (Chromium runs
  // unsandboxed as root anyway); fontconfig's own dependency brings a font for the screenshots.
  return await ensureDebianProgram(findChromium, PACKAGE, 'Chromium', options.log)
}
