/**
 * Where the API is and which token to show it. Each comes from the first of: the flag
 * (`--url`, `--token`), the environment (`VMPLANE_URL`, `VMPLANE_TOKEN`), the dev stack's data
 * directory (`VMPLANE_DATA_DIR`, default `.vmplane`, as `npm start` uses): `run/stack.json`, which
 * the running stack writes, then `api-token`, which outlives the stack.
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { stackPaths } from '../scripts/dev-stack/data-dir.js'
import type { StackInfo } from '../scripts/dev-stack/stack-file.js'
import { UsageError } from './errors.js'

export interface Connection {
  url: string
  token: string
}

export interface ConnectionFlags {
  url?: string
  token?: string
}

export function resolveConnection (flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): Connection {
  const paths = stackPaths(resolve(env.VMPLANE_DATA_DIR ?? '.vmplane'))
  // Read lazily: with both flags given, nothing on disk matters.
  let stack: Partial<StackInfo> | null | undefined
  const stackFile = () => (stack ??= readJson(paths.stackFile))

  const url = flags.url ?? nonEmpty(env.VMPLANE_URL) ?? stackFile()?.apiUrl
  if (url === undefined) {
    throw new UsageError(`no API URL: pass --url or set VMPLANE_URL, or start the dev stack (${paths.stackFile} is missing)`)
  }
  const token = flags.token ?? nonEmpty(env.VMPLANE_TOKEN) ?? stackFile()?.apiToken ?? readText(paths.apiTokenFile)
  if (token === undefined) {
    throw new UsageError(`no API token: pass --token or set VMPLANE_TOKEN (${paths.apiTokenFile} is missing)`)
  }
  return { url: url.replace(/\/+$/, ''), token }
}

function nonEmpty (value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

function readText (path: string): string | undefined {
  try {
    return nonEmpty(readFileSync(path, 'utf8'))
  } catch {
    return undefined
  }
}

/** A missing or half-written file counts as absent: the stack is not (yet) running. */
function readJson (path: string): Partial<StackInfo> | null {
  const text = readText(path)
  if (text === undefined) return null
  try {
    return JSON.parse(text) as Partial<StackInfo>
  } catch {
    return null
  }
}
