/**
 * vmplane's namespace and search attributes on a Temporal server that does not register them
 * itself: the cluster shape's (temporal-cluster.ts), as a deployment's admin tools do. The dev
 * server registers both from its own flags (temporal.ts).
 *
 * Each start asks the server what it has and creates only what is missing, with the real
 * `temporal` CLI an operator would use, before any worker or API starts: a workflow that sets an
 * attribute the server does not know fails its task.
 */
import { execFile } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { SearchAttributeType } from '@temporalio/common'
import { z } from 'zod'
import { SEARCH_ATTRIBUTE_KEYS } from '../contract/search-attributes.js'
import { waitFor, type WaitOptions } from './wait.js'

const execFileAsync = promisify(execFile)

/** The CLI's names for search attribute types (`--type`, `--search-attribute NAME=TYPE`). */
const CLI_TYPE_NAMES: Record<SearchAttributeType, string> = {
  [SearchAttributeType.TEXT]: 'Text',
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.BOOL]: 'Bool',
  [SearchAttributeType.DATETIME]: 'Datetime',
  [SearchAttributeType.KEYWORD_LIST]: 'KeywordList'
}

/** vmplane's search attributes as the CLI names them. */
export const CLI_SEARCH_ATTRIBUTES = SEARCH_ATTRIBUTE_KEYS.map((key) => ({ name: key.name, type: CLI_TYPE_NAMES[key.type] }))

/** As long as the dev server keeps closed executions, and docker-compose.yml's namespace too. */
const RETENTION = '24h'

/**
 * How long the services other than the frontend may go on with a namespace as it was before a
 * change: each keeps its own copy and reloads it every `system.namespaceCacheRefreshInterval`
 * (2 s by default), and SQL visibility keeps custom search attributes on the namespace. Nothing
 * outside the server shows when they have reloaded, so a start that registered something waits
 * this long once.
 */
const NAMESPACE_REFRESH_MS = 3000

export interface TemporalTarget {
  /** The `temporal` CLI. */
  temporal: string
  address: string
  namespace: string
}

/** Registers what is missing, waits until the server shows all of it; says what it created. */
export async function ensureNamespace (target: TemporalTarget, options: WaitOptions): Promise<string[]> {
  const created: string[] = []
  // The frontend may answer its health check a moment before it takes requests that reach the
  // database: the first attempts are retried like any readiness probe.
  if (await waitFor(`namespace ${target.namespace} described or created`, () => describeOrCreate(target), options) === 'created') {
    created.push(`namespace ${target.namespace}`)
  }
  const registered = await waitFor('the search attributes listed', () => searchAttributes(target), options)
  const mistyped = CLI_SEARCH_ATTRIBUTES.filter(({ name, type }) => name in registered && registered[name] !== type)
  if (mistyped.length > 0) {
    throw new Error(`namespace ${target.namespace} has ${mistyped.map(({ name, type }) => `${name} as ${registered[name]}, not ${type}`).join('; ')}: ` +
      'vmplane\'s workflows would fail to set them (a search attribute\'s type cannot be changed; use another namespace)')
  }
  const toCreate = CLI_SEARCH_ATTRIBUTES.filter(({ name }) => !(name in registered))
  if (toCreate.length > 0) {
    // The CLI pairs the n-th --name with the n-th --type.
    await cli(target, 'operator', 'search-attribute', 'create', ...toCreate.flatMap(({ name, type }) => ['--name', name, '--type', type]))
    created.push(...toCreate.map(({ name, type }) => `search attribute ${name} (${type})`))
  }
  await waitFor('the search attributes registered', async () => {
    const now = await searchAttributes(target)
    return CLI_SEARCH_ATTRIBUTES.every(({ name, type }) => now[name] === type) ? true : null
  }, options)
  if (created.length > 0) await sleep(NAMESPACE_REFRESH_MS, undefined, { signal: options.signal })
  return created
}

async function describeOrCreate (target: TemporalTarget): Promise<'existed' | 'created'> {
  try {
    await cli(target, 'operator', 'namespace', 'describe')
    return 'existed'
  } catch (error) {
    if (!/not found/i.test(String((error as { stderr?: string }).stderr))) throw error
  }
  await cli(target, 'operator', 'namespace', 'create', '--retention', RETENTION)
  return 'created'
}

const searchAttributeListSchema = z.object({
  customAttributes: z.record(z.string(), z.string()).default({})
})

/** The namespace's custom search attributes by name, with the CLI's type names. */
async function searchAttributes (target: TemporalTarget): Promise<Record<string, string>> {
  const listed = searchAttributeListSchema.parse(JSON.parse(await cli(target, 'operator', 'search-attribute', 'list', '--output', 'json')))
  return Object.fromEntries(Object.entries(listed.customAttributes).map(([name, type]) => [name, cliTypeName(type)]))
}

/** `INDEXED_VALUE_TYPE_KEYWORD_LIST` (the API's enum, as JSON shows it) → `KeywordList`. */
function cliTypeName (apiName: string): string {
  const bare = apiName.replace(/^INDEXED_VALUE_TYPE_/, '').replaceAll('_', '').toLowerCase()
  return Object.values(CLI_TYPE_NAMES).find((name) => name.toLowerCase() === bare) ?? apiName
}

async function cli (target: TemporalTarget, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(target.temporal, [...args, '--address', target.address, '--namespace', target.namespace], { timeout: 15_000 })
  return stdout
}
