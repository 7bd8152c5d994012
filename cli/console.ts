/**
 * `vmplane instances console`: the instance's serial console in this terminal, over the API's
 * WebSocket (api/routes/console.ts). The terminal is raw while attached, so every key goes to
 * the guest, Ctrl-C included; Ctrl-] (as in telnet and virsh) leaves. A console the API refuses
 * ends as any refusal does: one line and an exit code saying whether trying again could help.
 */
import { WebSocket } from 'ws'
import { CliError, EXIT } from './errors.js'

/** Ctrl-]: the byte that leaves the console. */
const ESCAPE = 0x1d

export async function attachConsole (target: { url: string, headers: Record<string, string> }, name: string): Promise<void> {
  const socket = new WebSocket(target.url, { headers: target.headers })
  const { stdin, stdout, stderr } = process
  const raw = stdin.isTTY
  let left = false

  const ended = new Promise<void>((resolve, reject) => {
    socket.once('unexpected-response', (_request, response) => {
      reject(new CliError(`the API refused the console: ${response.statusCode ?? 'no status'} ${response.statusMessage ?? ''}`.trim(), EXIT.refused))
    })
    socket.once('error', (err) => { reject(new CliError(`cannot reach the console: ${err.message}`, EXIT.unavailable)) })
    socket.once('close', (code, reason) => {
      if (left || code < 4000) resolve()
      else reject(new CliError(`console closed: ${reason.toString() || `code ${code}`}`, code === 4503 ? EXIT.unavailable : EXIT.refused))
    })
  })
  socket.on('message', (data: Buffer) => { stdout.write(data) })
  const onInput = (chunk: Buffer): void => {
    const escape = chunk.indexOf(ESCAPE)
    if (escape >= 0) {
      if (escape > 0) socket.send(chunk.subarray(0, escape))
      left = true
      socket.close()
      return
    }
    socket.send(chunk)
  }
  // Input is read only once the socket is open: a listener would start a pipe flowing at once,
  // and what a script pipes in would meet a socket still connecting.
  socket.once('open', () => {
    stderr.write(`connected to the serial console of ${name}; Ctrl-] leaves\r\n`)
    if (raw) stdin.setRawMode(true)
    stdin.on('data', onInput)
    // The end of input (a pipe closed) leaves too.
    stdin.once('end', () => { left = true; socket.close() })
    stdin.resume()
  })
  try {
    await ended
  } finally {
    stdin.off('data', onInput)
    if (raw) stdin.setRawMode(false)
    stdin.pause()
    if (left) stderr.write('\r\nleft the console\r\n')
  }
}
