/**
 * The stack's Temporal server in its dev shape (the default; temporal-cluster.ts is the other):
 * `temporal server start-dev` with its database in a SQLite file in the data directory, the Web
 * UI on, vmplane's search attributes registered, and the dynamic config Compose gives its server.
 * Also what both shapes share: the frontend's address and the wait for it.
 *
 * `--search-attribute` is given on every start, not only the first: on an existing database the
 * dev server finds the attributes already registered and starts normally (checked with CLI
 * 1.5.1), so no separate `temporal operator search-attribute create` step is needed.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { parse } from 'yaml'
import type { StackConfig } from './config.js'
import type { StackPaths } from './data-dir.js'
import { REPO_ROOT } from '../scripts/tools/paths.js'
import type { ComponentSpec } from './supervisor.js'
import { CLI_SEARCH_ATTRIBUTES } from './temporal-namespace.js'
import { waitUntil, type WaitOptions } from './wait.js'

const execFileAsync = promisify(execFile)
export const DYNAMIC_CONFIG_FILE = join(REPO_ROOT, 'config', 'temporal-dynamic-config.yaml')

export function temporalAddress (config: StackConfig): string {
  return `127.0.0.1:${config.temporalPort}`
}

/** The dev server's built-in Web UI, or the cluster shape's UI server (temporal-ui.ts). */
export function temporalUiUrl (config: StackConfig): string {
  return `http://127.0.0.1:${config.temporalUiPort}`
}

export function temporalSpec (temporal: string, config: StackConfig, paths: StackPaths, env: NodeJS.ProcessEnv): ComponentSpec {
  const args = [
    'server', 'start-dev',
    '--ip', '127.0.0.1',
    '--port', String(config.temporalPort),
    '--ui-port', String(config.temporalUiPort),
    '--db-filename', paths.temporalDb,
    // WAL and NORMAL sync: fast enough for a workload of many small transactions, still
    // crash-safe for the database (the last transactions may be lost on a power cut, not the file).
    '--sqlite-pragma', 'journal_mode=WAL',
    '--sqlite-pragma', 'synchronous=NORMAL',
    ...(config.temporalDynamicConfig === 'tuned' ? dynamicConfigFlags() : []),
    ...CLI_SEARCH_ATTRIBUTES.flatMap(({ name, type }) => ['--search-attribute', `${name}=${type}`])
  ]
  if (config.namespace !== 'default') args.push('--namespace', config.namespace)
  if (config.temporalMetricsPort !== null) args.push('--metrics-port', String(config.temporalMetricsPort))
  return { name: 'temporal', command: temporal, args, env }
}

/**
 * config/temporal-dynamic-config.yaml (Compose mounts it into its Temporal server; it says why
 * each setting) as the dev server's flags: `--dynamic-config-value KEY=<JSON value>`.
 */
function dynamicConfigFlags (): string[] {
  const settings = parse(readFileSync(DYNAMIC_CONFIG_FILE, 'utf8')) as Record<string, Array<{ value: unknown }>>
  return Object.entries(settings).flatMap(([key, [setting]]) => ['--dynamic-config-value', `${key}=${JSON.stringify(setting!.value)}`])
}

/** Waits until the frontend reports itself serving. */
export async function waitForTemporal (temporal: string, address: string, options: WaitOptions): Promise<void> {
  await waitUntil(`Temporal at ${address} serving`, async () => {
    const { stdout } = await execFileAsync(temporal, ['operator', 'cluster', 'health', '--address', address], { timeout: 5000 })
    return stdout.includes('SERVING')
  }, options)
}
