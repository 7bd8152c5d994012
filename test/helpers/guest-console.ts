/**
 * A simulated guest told to probe its network from its serial console, as a user would at a real
 * guest's shell (docs/simulator.md, "Guest network"): through the API's console relay (a
 * WebSocket), one command at a time, each answered by the one line the guest prints for it.
 */
import WebSocket from 'ws'
import type { TestStack } from './stack.js'

export class GuestConsole {
  #output = ''
  #waiters: Array<() => void> = []

  private constructor (private readonly socket: WebSocket) {
    socket.on('message', (data: Buffer) => {
      this.#output += data.toString('utf8')
      for (const wake of this.#waiters.splice(0)) wake()
    })
  }

  static async open (stack: TestStack, instanceId: string, projectPath = ''): Promise<GuestConsole> {
    const url = `${stack.info.apiUrl.replace(/^http/, 'ws')}/v1${projectPath}/instances/${instanceId}/console`
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${stack.info.apiToken}` } })
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
    return new GuestConsole(socket)
  }

  /** Types `command` and returns the first line after it that matches `answer`. */
  async run (command: string, answer: RegExp, timeoutMs = 20_000): Promise<string> {
    const from = this.#output.length
    this.socket.send(Buffer.from(`${command}\r`))
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const line = this.#output.slice(from).split(/\r?\n/).find((candidate) => answer.test(candidate))
      if (line !== undefined) return line
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`the guest did not answer ${JSON.stringify(command)} with ${answer} in ${timeoutMs} ms; it printed: ${JSON.stringify(this.#output.slice(from).slice(-500))}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.#waiters.push(() => { clearTimeout(timer); resolve() })
      })
    }
  }

  /**
   * `ping <address> <count> <interval>` at the guest: how many of the replies came back, and the
   * longest the guest went without one while it was sending (a blackout, to within the interval).
   */
  async ping (address: string, count = 2, intervalMs = 200): Promise<{ sent: number, received: number, longestGapMs: number }> {
    const line = await this.run(`ping ${address} ${count} ${intervalMs}`, new RegExp(`^sim\\.ping ${address.replaceAll('.', '\\.')}: \\d+/\\d+ replies`),
      count * intervalMs + 20_000)
    const [, received, sent, gap] = /: (\d+)\/(\d+) replies, longest gap (\d+) ms/.exec(line) ?? []
    if (gap === undefined) throw new Error(`not a ping summary: ${line}`)
    return { sent: Number(sent), received: Number(received), longestGapMs: Number(gap) }
  }

  /** `connect <address> <port>` at the guest: `echo ok`, `refused`, `timed out` or another error. */
  async connect (address: string, port: number): Promise<string> {
    const line = await this.run(`connect ${address} ${port}`, new RegExp(`^sim\\.connect ${address.replaceAll('.', '\\.')}:${port}: `))
    return line.slice(line.indexOf(': ') + 2).trim()
  }

  close (): void {
    this.socket.close()
  }
}
