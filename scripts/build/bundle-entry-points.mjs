/**
 * Bundles the host agent, the API and the worker, each with its dependencies, into one file
 * apiece (`dist/bundle/agent.js`, `api.js`, `worker.js`), which is what the dev stack, the image
 * and Compose run; and the dev stack's host watchdog (`host-watchdog.js`). Node 20 loads an ES module graph of some 900 files slowly: the agent took 1.7 s
 * of CPU to start, the API 1.9 s and the worker 1.9 s (to its first poll), most of it resolving
 * and linking modules, and all three restart often (a service manager restarting a crashed
 * component, the fault tests' kills); bundled, each starts in about 0.5 to 0.6 s less. The sooner
 * a restarted agent listens, the sooner it applies what happened to its VMMs meanwhile (a
 * migration's end, say).
 *
 * What stays outside the bundles, loaded from node_modules as before:
 * - packages that start threads or serve files of their own by paths they resolve themselves:
 *   @fastify/swagger and @fastify/swagger-ui (the UI's static files), pino and pino-pretty (pino
 *   starts its transports from files of its own);
 * - the SDK's native core (@temporalio/core-bridge), and the webpack toolchain of the SDK's
 *   workflow bundler, which the worker never runs: it loads the workflow bundle `npm run build`
 *   made (worker/workflow-bundle.ts).
 * The worker's bundle holds its one copy of each @temporalio package, shared by the SDK and the
 * activities, whose failures the SDK recognises by class.
 *
 * A bundled module would find the wrong files from the bundle's location, so the build gives
 * each its own: vmplane's modules that read `import.meta.url` get their own URL, relative to the
 * bundle (the dist tree may move); CommonJS modules of packages get their own `__dirname` and
 * `__filename`, in node_modules where npm put them (what they read beside themselves is still
 * there); the SDK's worker, which finds its own files with `require.resolve('./…')` (the thread
 * that runs workflows, in a V8 isolate of its own), has those paths named by its package. A
 * package that reads `import.meta.url` fails the build: leave it out of the bundles.
 * Source maps are linked, for `node --enable-source-maps`.
 *
 * Plain JavaScript, run on the compiled product after tsc (`npm run build`, and the Dockerfile).
 */
import { readFile } from 'node:fs/promises'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const DIST = fileURLToPath(new URL('../../dist', import.meta.url))
const OUT_DIR = join(DIST, 'bundle')
const ENTRY_POINTS = ['agent', 'api', 'worker', 'host-watchdog']
const EXTERNAL = [
  '@fastify/swagger', '@fastify/swagger-ui', 'pino', 'pino-pretty', '@temporalio/core-bridge',
  'webpack', 'memfs', 'unionfs', '@swc/core', 'swc-loader', 'source-map-loader'
]
/** The bundle's URL, which the banner declares for the modules whose location is rewritten. */
const BUNDLE_URL = '__vmplaneBundleUrl'
const SDK_WORKER = `${sep}@temporalio${sep}worker${sep}`

/** Rewrites what would find the wrong file from inside a bundle (module comment). */
const fileLocations = {
  name: 'file-locations',
  setup (build) {
    build.onLoad({ filter: /\.js$/ }, async ({ path }) => {
      const read = await readFile(path, 'utf8')
      let source = path.includes(SDK_WORKER) ? packageRelative(read, path) : read
      if (path.includes(`${sep}node_modules${sep}`)) {
        if (source.includes('import.meta.url')) throw new Error(`${path} reads import.meta.url, which is the bundle's in a bundle: add its package to EXTERNAL`)
        if (/\b__(dirname|filename)\b/.test(source)) source = `${ownLocation(path)}\n${source}`
      } else if (source.includes('import.meta.url')) {
        source = source.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle(path))}, import.meta.url).href`)
      }
      // Unchanged, the file is esbuild's to load as it would.
      return source === read ? undefined : { contents: source, loader: 'js' }
    })
  }
}

/** A file's path relative to the bundles, as a URL path. */
function fromBundle (path) {
  return relative(OUT_DIR, path).split(sep).join('/')
}

/**
 * A CommonJS module's own `__dirname` and `__filename`, where npm put it (a bundle has neither):
 * what it reads beside itself (source-map's WebAssembly, say) is still there.
 */
function ownLocation (path) {
  // Not import.meta.url itself, which would make esbuild take the module for an ES module.
  const own = (file) => `decodeURIComponent(new URL(${JSON.stringify(fromBundle(file))}, ${BUNDLE_URL}).pathname)`
  return `var __dirname = ${own(dirname(path))}, __filename = ${own(path)};`
}

/** `require.resolve('./x')` in a file of @temporalio/worker, as `require.resolve('@temporalio/worker/lib/…/x')`. */
function packageRelative (source, path) {
  const packageDir = path.slice(0, path.lastIndexOf(SDK_WORKER) + SDK_WORKER.length)
  return source.replaceAll(/require\.resolve\('(\.\.?\/[^']+)'\)/g, (_, file) =>
    `require.resolve('@temporalio/worker/${relative(packageDir, join(dirname(path), file)).split(sep).join('/')}')`)
}

await build({
  entryPoints: Object.fromEntries(ENTRY_POINTS.map((name) => [name, join(DIST, 'bin', `${name}.js`)])),
  outdir: OUT_DIR,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: 'linked',
  external: EXTERNAL,
  plugins: [fileLocations],
  logLevel: 'warning',
  // The CommonJS packages in the bundle call `require` for Node's built-ins.
  banner: { js: `import { createRequire as createBundleRequire } from 'node:module'; const require = createBundleRequire(import.meta.url); const ${BUNDLE_URL} = import.meta.url;` }
})
console.log(`bundled ${ENTRY_POINTS.join(', ')} into ${OUT_DIR}`)
