/**
 * What the CLI reads of a dev stack's data directory (`npm start`, stack/): where the API is and
 * which token to show it, when neither a flag nor a variable says. These files are a contract
 * between the stack, which writes them, and the CLI, which reads them: the stack lays out its
 * data directory with these paths and writes its stack file as a `PublishedStack` and more
 * (stack/data-dir.ts, stack/stack-file.ts), so the two cannot drift apart, and the CLI imports
 * nothing of the stack.
 *
 *   <data directory>/run/stack.json   written whole once the stack is ready, removed when it stops
 *   <data directory>/api-token        the operator's token, made at the first start; outlives the stack
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'

/** The dev stack's data directory unless `VMPLANE_DATA_DIR` names another, from the working directory. */
export const DEFAULT_DATA_DIR = '.vmplane'

export function stackFilePath (dataDir: string): string {
  return join(dataDir, 'run', 'stack.json')
}

export function apiTokenPath (dataDir: string): string {
  return join(dataDir, 'api-token')
}

/** What a client needs of run/stack.json; the stack writes more (stack/stack-file.ts). */
export interface PublishedStack {
  /** The one address clients use: the API, or HAProxy in front of its replicas. */
  apiUrl: string
  /** The operator's token. */
  apiToken: string
}

/**
 * run/stack.json as the running stack wrote it, read as `T` (what the stack itself reads back, or
 * the `PublishedStack` a client needs); null when there is none: the stack is not running, or
 * not ready yet. A file being written counts as absent: the stack writes it whole, by rename.
 */
export async function readStackFile<T extends PublishedStack = PublishedStack> (path: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T
  } catch {
    return null
  }
}
