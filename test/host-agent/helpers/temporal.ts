/**
 * A real Temporal dev server for a test, as the brief for the agent's reports asks:
 * `temporal server start-dev --headless` on 127.0.0.1 and a free port, vmplane's search
 * attributes registered, and its database in a file so it can be killed and started again with
 * its history intact. Ended by PID.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { join } from 'node:path'
import { Client, Connection } from '@temporalio/client'
import { defaultPayloadConverter, SearchAttributeType } from '@temporalio/common'
import { freePorts } from '../../helpers/launcher.js'
import { waitForTemporal } from '../../../stack/temporal.js'
import { REPO_ROOT, TOOLS_BIN_DIR } from '../../../scripts/tools/paths.js'
import { SEARCH_ATTRIBUTE_KEYS } from '../../../contract/search-attributes.js'

const TEMPORAL_CLI = process.env.TEMPORAL_CLI ?? join(TOOLS_BIN_DIR, 'temporal')

export interface Signal {
  name: string
  args: unknown[]
}

export class TestTemporal {
  #child: ChildProcess | null = null
  #exit: Promise<void> | null = null
  #connection: Connection | null = null

  private constructor (readonly address: string, readonly dbFile: string, readonly logFile: string) {}

  static async start (dir: string): Promise<TestTemporal> {
    const server = new TestTemporal(`127.0.0.1:${await freePorts(1)}`, join(dir, 'temporal.db'),
      join(REPO_ROOT, 'test-output', 'host-agent', `temporal-${Date.now()}.log`))
    await server.restart()
    return server
  }

  /** Starts the server (again), on the same port and database. */
  async restart (): Promise<void> {
    const port = this.address.split(':')[1]!
    const searchAttributes = SEARCH_ATTRIBUTE_KEYS.flatMap((key) => {
      if (key.type !== SearchAttributeType.KEYWORD) throw new Error(`search attribute ${key.name} is not a keyword`)
      return ['--search-attribute', `${key.name}=Keyword`]
    })
    const child = spawn(TEMPORAL_CLI, [
      'server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', port, '--db-filename', this.dbFile,
      ...searchAttributes
    ], { stdio: ['ignore', 'pipe', 'pipe'] })
    const log = createWriteStream(this.logFile, { flags: 'a' })
    child.stdout!.pipe(log, { end: false })
    child.stderr!.pipe(log, { end: false })
    this.#child = child
    this.#exit = new Promise((resolve) => child.once('exit', () => { resolve() }))
    await waitForTemporal(TEMPORAL_CLI, this.address, { timeoutMs: 60_000, intervalMs: 200 })
  }

  /** Kills the server (SIGKILL by default: Temporal goes away without warning). */
  async kill (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.#connection?.close()
    this.#connection = null
    if (this.#child !== null && this.#child.exitCode === null && this.#child.signalCode === null) {
      process.kill(this.#child.pid!, signal)
    }
    await this.#exit
    this.#child = null
  }

  async client (): Promise<Client> {
    this.#connection ??= await Connection.connect({ address: this.address })
    return new Client({ connection: this.#connection })
  }

  /** The signals a workflow received, decoded, in order. */
  async signals (workflowId: string): Promise<Signal[]> {
    const history = await (await this.client()).workflow.getHandle(workflowId).fetchHistory()
    return (history.events ?? []).flatMap((event) => {
      const signaled = event.workflowExecutionSignaledEventAttributes
      if (signaled == null) return []
      const payloads = signaled.input?.payloads ?? []
      return [{ name: signaled.signalName ?? '', args: payloads.map((p) => defaultPayloadConverter.fromPayload(p)) }]
    })
  }
}
