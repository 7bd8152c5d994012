/**
 * The stack's Temporal server: `temporal server start-dev` with its database in a SQLite file in
 * the data directory, the Web UI on, and vmplane's search attributes registered.
 *
 * `--search-attribute` is given on every start, not only the first: on an existing database the
 * dev server finds the attributes already registered and starts normally (checked with CLI
 * 1.5.1), so no separate `temporal operator search-attribute create` step is needed.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { SearchAttributeType } from '@temporalio/common'
import { SEARCH_ATTRIBUTE_KEYS } from '../../workflows/search-attributes.js'
import type { StackConfig } from '../../config/index.js'
import type { StackPaths } from './data-dir.js'
import type { ComponentSpec } from './supervisor.js'
import { waitUntil, type WaitOptions } from './wait.js'

const execFileAsync = promisify(execFile)

/** The CLI's names for search attribute types (`--search-attribute NAME=TYPE`). */
const CLI_TYPE_NAMES: Record<SearchAttributeType, string> = {
  [SearchAttributeType.TEXT]: 'Text',
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.BOOL]: 'Bool',
  [SearchAttributeType.DATETIME]: 'Datetime',
  [SearchAttributeType.KEYWORD_LIST]: 'KeywordList'
}

export function temporalAddress (config: StackConfig): string {
  return `127.0.0.1:${config.temporalPort}`
}

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
    // A worker that schedules an activity on its own task queue gets it back in the reply to
    // its workflow task, not through a separate poll (what the TS SDK's own CI runs with).
    '--dynamic-config-value', 'system.enableActivityEagerExecution=true',
    // An execution that continues as new within a second of its start (a stop that reached a
    // create's execution as it ended) would otherwise have its next run held back to that second.
    // vmplane continues as new only when a request arrives, never in a loop. The same settings
    // as config/temporal-dynamic-config.yaml, which Compose gives its Temporal server.
    '--dynamic-config-value', 'history.workflowIdReuseMinimalInterval="0s"',
    ...SEARCH_ATTRIBUTE_KEYS.flatMap((key) => ['--search-attribute', `${key.name}=${CLI_TYPE_NAMES[key.type]}`])
  ]
  if (config.namespace !== 'default') args.push('--namespace', config.namespace)
  if (config.temporalMetricsPort !== null) args.push('--metrics-port', String(config.temporalMetricsPort))
  return { name: 'temporal', command: temporal, args, env }
}

/** Waits until the frontend reports itself serving. */
export async function waitForTemporal (temporal: string, address: string, options: WaitOptions): Promise<void> {
  await waitUntil(`Temporal at ${address} serving`, async () => {
    const { stdout } = await execFileAsync(temporal, ['operator', 'cluster', 'health', '--address', address], { timeout: 5000 })
    return stdout.includes('SERVING')
  }, options)
}
