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

export function runCommand (command: string, args: readonly string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err === null) resolve(stdout)
      else reject(new CommandError([command, ...args].join(' '), stderr, err))
    })
  })
}
