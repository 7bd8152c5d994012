/**
 * Bundles the host agent and the API, each with its dependencies, into one file apiece
 * (`dist/bundle/agent.js`, `dist/bundle/api.js`), which is what the dev stack, the image and
 * Compose run. Node 20 loads an ES module graph of some 900 files slowly: the agent took 1.7 s of
 * CPU to start and the API 1.9 s, most of it resolving and linking modules, and both restart
 * often (a service manager restarting a crashed agent, the fault tests' kills); bundled, each
 * starts in about 0.6 s less. The sooner a restarted agent listens, the sooner it applies what
 * happened to its VMMs meanwhile (a migration's end, say).
 *
 * What stays outside the bundle, loaded from node_modules as before:
 * - packages that find their own files by `__dirname`, which a bundle does not have:
 *   @fastify/swagger and @fastify/swagger-ui (the UI's static files), pino and pino-pretty (pino
 *   starts its transports from files of its own);
 * - @temporalio/worker and its native core, which the agent and the API never import (the worker
 *   is not bundled: one copy of each @temporalio package must serve both the SDK and the
 *   activities, whose failures the SDK recognises by class).
 *
 * In a bundle, `import.meta.url` is the bundle's, not the module's: a path found from it would be
 * wrong. None of the agent's or the API's modules uses it; the build fails if one comes to.
 * Source maps are linked, for `node --enable-source-maps`.
 *
 * Plain JavaScript, run on the compiled product after tsc (`npm run build`, and the Dockerfile).
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const DIST = fileURLToPath(new URL('../../dist', import.meta.url))
const OUT_DIR = join(DIST, 'bundle')
const ENTRY_POINTS = ['agent', 'api']
const EXTERNAL = ['@fastify/swagger', '@fastify/swagger-ui', 'pino', 'pino-pretty', '@temporalio/worker', '@temporalio/core-bridge']

await build({
  entryPoints: Object.fromEntries(ENTRY_POINTS.map((name) => [name, join(DIST, 'bin', `${name}.js`)])),
  outdir: OUT_DIR,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: 'linked',
  external: EXTERNAL,
  logLevel: 'warning',
  // The CommonJS packages in the bundle call `require` for Node's built-ins.
  banner: { js: "import { createRequire as createBundleRequire } from 'node:module'; const require = createBundleRequire(import.meta.url);" }
})
for (const name of ENTRY_POINTS) {
  // The banner's own use is the one expected.
  const uses = (await readFile(join(OUT_DIR, `${name}.js`), 'utf8')).split('import.meta.url').length - 1
  if (uses > 1) throw new Error(`dist/bundle/${name}.js: a bundled module reads import.meta.url, which is the bundle's here; find its path another way, or leave its package out of the bundle`)
}
console.log(`bundled ${ENTRY_POINTS.join(' and ')} into ${OUT_DIR}`)
