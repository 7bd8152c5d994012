/**
 * Where the stack's output goes: every component's stdout and stderr to its own log file, as
 * they come, and line by line to the console behind a short prefix, coloured on a terminal.
 * The stack's own messages go the same way under the name `stack`.
 */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { styleText } from 'node:util'

type Colour = Parameters<typeof styleText>[0]
const PALETTE: Colour[] = ['cyan', 'green', 'yellow', 'blue', 'magenta', 'red', 'cyanBright', 'greenBright', 'yellowBright', 'blueBright', 'magentaBright']
const PREFIX_WIDTH = 12

/**
 * The console is a convenience, the log files are the record: once the terminal is gone
 * (EPIPE on stdout), lines go to the log files only, and the stack carries on, stopping included.
 */
class ConsoleLines {
  private open = true

  constructor () {
    process.stdout.on('error', () => { this.open = false })
  }

  write (line: string): void {
    if (this.open) process.stdout.write(`${line}\n`)
  }
}

export class StackOutput {
  private readonly console = new ConsoleLines()
  private readonly logs: WriteStream[] = []
  private nextColour = 0
  private readonly stack: ComponentOutput

  constructor (private readonly logDir: string, private readonly colour = process.stdout.isTTY) {
    mkdirSync(logDir, { recursive: true })
    this.stack = this.component('stack', 'bold')
  }

  /** A line from the stack itself. */
  log (message: string): void {
    this.stack.note(message)
  }

  component (name: string, colour?: Colour): ComponentOutput {
    const log = createWriteStream(join(this.logDir, `${name}.log`), { flags: 'a' })
    this.logs.push(log)
    const style = colour ?? PALETTE[this.nextColour++ % PALETTE.length]
    const label = name.length > PREFIX_WIDTH ? name : name.padEnd(PREFIX_WIDTH)
    const prefix = this.colour ? styleText(style, `${label} |`) : `${label} |`
    return new ComponentOutput(log, prefix, this.console)
  }

  /** Flushes and closes every log file. */
  async close (): Promise<void> {
    await Promise.all(this.logs.map((log) => new Promise((resolve) => log.end(resolve))))
  }
}

export class ComponentOutput {
  constructor (private readonly log: WriteStream, private readonly prefix: string, private readonly console: ConsoleLines) {}

  /** Copies a process's stdout or stderr here, the console getting whole lines. */
  pipeFrom (source: Readable): void {
    let partial = ''
    source.setEncoding('utf8') // decodes characters split across chunks
    source.on('data', (text: string) => {
      this.log.write(text)
      const lines = (partial + text).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) this.print(line)
    })
    source.once('end', () => {
      if (partial !== '') this.print(partial)
    })
  }

  /** A line about the component (started, exited, restarting) in its log and on the console. */
  note (message: string): void {
    this.log.write(`--- ${new Date().toISOString()} ${message}\n`)
    this.print(message)
  }

  private print (line: string): void {
    this.console.write(`${this.prefix} ${line}`)
  }
}
