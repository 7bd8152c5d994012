/**
 * The live progress line of `--wait`: the instance's states so far and the time taken,
 * `web-1: creating → starting → running (4.2 s)`. On a terminal the line is rewritten in place
 * at every poll; anywhere else (a log, a pipe, CI) each transition gets a line of its own, since
 * carriage returns would garble the file. It goes to stderr, keeping stdout for the result.
 */
import { seconds } from './output.js'

export class Progress {
  private readonly states: string[] = []
  private readonly startedAt = performance.now()

  constructor (private readonly name: string, private readonly stream: NodeJS.WriteStream = process.stderr) {}

  /** Records the state seen by a poll; a new one is a transition. */
  observe (state: string): void {
    const isNew = this.states.at(-1) !== state
    if (isNew) this.states.push(state)
    if (this.stream.isTTY) this.stream.write(`\r\x1b[2K${this.line(this.states)}`)
    else if (isNew) this.stream.write(`${this.line(this.states.slice(-2))}\n`)
  }

  /** Ends the rewritten line, so what follows starts on a line of its own. */
  end (): void {
    if (this.stream.isTTY && this.states.length > 0) this.stream.write('\n')
  }

  private line (states: string[]): string {
    return `${this.name}: ${states.join(' → ')} (${seconds(performance.now() - this.startedAt)})`
  }
}
