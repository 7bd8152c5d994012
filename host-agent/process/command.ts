/**
 * Runs one of the host tools the agent builds devices with (qemu-img, mkdosfs, mcopy, ip): no
 * shell, arguments as given, and a failure that says what the tool printed.
 */
import { execFile } from 'node:child_process'

export class CommandError extends Error {
  override name = 'CommandError'
  constructor (readonly command: string, readonly stderr: string, cause: Error) {
    super(`${command} failed: ${stderr.trim() === '' ? cause.message : stderr.trim()}`, { cause })
  }
}

/** Runs the tool; `input`, when given, is what it reads on its standard input. */
export function runCommand (command: string, args: readonly string[], options: { timeoutMs?: number, input?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(command, args, { timeout: options.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err === null) resolve(stdout)
      else reject(new CommandError([command, ...args].join(' '), stderr, err))
    })
    if (options.input === undefined) return
    // A tool that exits without reading all of it closes the pipe (EPIPE): its exit status says
    // what went wrong, not the write.
    child.stdin?.on('error', () => {})
    child.stdin?.end(options.input)
  })
}
