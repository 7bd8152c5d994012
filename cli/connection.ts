/**
 * Where the API is and which token to show it. Each comes from the first of: the flag
 * (`--url`, `--token`), the environment (`VMPLANE_URL`, `VMPLANE_TOKEN`), the dev stack's data
 * directory (`VMPLANE_DATA_DIR`, default `.vmplane`, as `npm start` uses): `run/stack.json`, which
 * the running stack writes, then `api-token`, which outlives the stack (dev-stack-files.ts).
 *
 * The URL may be a list, separated by commas: the API's replicas, each tried in turn when another
 * cannot be reached (api-client.ts).
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { DEFAULT_DATA_DIR, apiTokenPath, readStackFile, stackFilePath, type PublishedStack } from './dev-stack-files.js'
import { UsageError } from './errors.js'

export interface Connection {
  /** One API's base URL, or several replicas' of one API. */
  urls: string[]
  token: string
}

export interface ConnectionFlags {
  url?: string
  token?: string
}

export async function resolveConnection (flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): Promise<Connection> {
  const dataDir = resolve(env.VMPLANE_DATA_DIR ?? DEFAULT_DATA_DIR)
  const paths = { stackFile: stackFilePath(dataDir), apiTokenFile: apiTokenPath(dataDir) }
  // Read lazily: with both flags given, nothing on disk matters. A missing or half-written file
  // counts as absent: the stack is not (yet) running.
  let stack: Promise<PublishedStack | null> | undefined
  const stackFile = async () => await (stack ??= readStackFile(paths.stackFile))

  const url = flags.url ?? nonEmpty(env.VMPLANE_URL) ?? (await stackFile())?.apiUrl
  if (url === undefined) {
    throw new UsageError(`no API URL: pass --url or set VMPLANE_URL, or start the dev stack (${paths.stackFile} is missing)`)
  }
  const token = flags.token ?? nonEmpty(env.VMPLANE_TOKEN) ?? (await stackFile())?.apiToken ?? await readText(paths.apiTokenFile)
  if (token === undefined) {
    throw new UsageError(`no API token: pass --token or set VMPLANE_TOKEN (${paths.apiTokenFile} is missing)`)
  }
  const urls = url.split(',').map((one) => one.trim().replace(/\/+$/, '')).filter((one) => one !== '')
  if (urls.length === 0) throw new UsageError(`no API URL in '${url}'`)
  return { urls, token }
}

function nonEmpty (value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

async function readText (path: string): Promise<string | undefined> {
  try {
    return nonEmpty(await readFile(path, 'utf8'))
  } catch {
    return undefined
  }
}
