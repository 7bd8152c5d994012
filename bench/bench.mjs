/**
 * `npm run bench:<name> [-- options]`: install and build what is missing or stale, then run the
 * benchmark `dist/bench/<name>.js` with the given options.
 */
import { join } from 'node:path'
import { REPO_ROOT, ensureBuilt, ensureInstalled, run } from '../scripts/tools/bootstrap.mjs'

const [name, ...args] = process.argv.slice(2)
ensureInstalled()
ensureBuilt()
process.exit(run(process.execPath, [join(REPO_ROOT, 'dist', 'bench', `${name}.js`), ...args]))
