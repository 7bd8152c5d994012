/**
 * What every command's action needs: a client for the API its global options point at, the
 * project it acts in, and the output format. Built when the action runs, so `--help` and usage
 * errors need no API at all.
 */
import { randomUUID } from 'node:crypto'
import type { Command } from 'commander'
import { ApiClient } from './api-client.js'
import { resolveConnection, type ConnectionFlags } from './connection.js'
import { printJson, printText, type OutputFormat } from './output.js'

export interface Context {
  api: ApiClient
  output: OutputFormat
  /** The project's routes: `/v1/projects/<project>`. */
  project: string
}

export interface GlobalOptions extends ConnectionFlags {
  output: OutputFormat
  project: string
}

export async function contextOf (command: Command): Promise<Context> {
  const options = command.optsWithGlobals<GlobalOptions>()
  // One key per invocation: the client's retries of its one change reuse it, another run gets its own.
  return {
    api: new ApiClient(await resolveConnection(options), `vmplane-cli-${randomUUID()}`),
    output: options.output,
    project: `/v1/projects/${encodeURIComponent(options.project)}`
  }
}

/** The API's JSON as it came, or its table view. */
export function show<T> (context: Context, value: T, view: (value: T) => string): void {
  if (context.output === 'json') printJson(value)
  else printText(view(value))
}
