/**
 * Probes of a simulated guest's network (docs/simulator.md, "Guest network"), for the tests:
 * from a host's network namespace with `ping` (Debian's iputils-ping, which `npm test`
 * installs: stack/host-tools.ts PROBE_TOOLS) and a TCP echo check run by Node inside the
 * namespace; and from a guest, by typing a command at its serial console and reading the line
 * it prints.
 */
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { promisify } from 'node:util'
import { waitFor } from '../../stack/wait.js'

export interface PingResult {
  sent: number
  received: number
}

const run = promisify(execFile)

/** `ip netns exec <netns> <command…>`, with what it printed whatever its exit status (ping's says how many replies came). */
async function inNamespace (netns: string, command: string[], timeoutMs: number): Promise<{ stdout: string, stderr: string }> {
  return await run('ip', ['netns', 'exec', netns, ...command], { timeout: timeoutMs })
    .catch((err: { stdout?: string, stderr?: string }) => ({ stdout: err.stdout ?? '', stderr: err.stderr ?? '' }))
}

/**
 * Pings `address` from the namespace: `count` requests (3) 200 ms apart, waiting `timeoutMs`
 * (1 s) for each reply. Throws when ping says nothing of what it sent (no route, say).
 */
export async function ping (netns: string, address: string, options: { count?: number, timeoutMs?: number } = {}): Promise<PingResult> {
  const count = options.count ?? 3
  const waitSeconds = Math.max(1, Math.ceil((options.timeoutMs ?? 1000) / 1000))
  const { stdout, stderr } = await inNamespace(netns, ['ping', '-n', '-c', String(count), '-W', String(waitSeconds), '-i', '0.2', address],
    count * (waitSeconds + 1) * 1000 + 5000)
  const summary = /(\d+) packets transmitted, (\d+) received/.exec(stdout)
  if (summary === null) throw new Error(`ping ${address} in ${netns} printed no summary: ${stdout}${stderr}`)
  return { sent: Number(summary[1]), received: Number(summary[2]) }
}

/** Connects from inside a namespace, sends a line, and reports whether it comes back. */
const ECHO_SCRIPT = `
const [host, port, timeoutMs] = process.argv.slice(1)
const line = 'vmplane net-probe\\n'
let received = ''
const done = (result) => { console.log(result); process.exit(0) }
const socket = require('node:net').connect({ host, port: Number(port) })
socket.setTimeout(Number(timeoutMs), () => done('timed out'))
socket.on('connect', () => socket.write(line))
socket.on('data', (chunk) => { received += chunk; if (received.length >= line.length) done(received === line ? 'echo ok' : 'echoed ' + JSON.stringify(received)) })
socket.on('end', () => done('closed before the echo'))
socket.on('error', (err) => done(err.code === 'ECONNREFUSED' ? 'refused' : err.code === 'ETIMEDOUT' ? 'timed out' : err.message))
`

/**
 * A TCP echo probe of `address:port` from the namespace, within `timeoutMs` (connecting and the
 * echo), worded as the guest's `connect` words it: 'echo ok', 'refused', 'timed out', or what
 * else went wrong.
 */
export async function tcpEcho (netns: string, address: string, port: number, options: { timeoutMs: number }): Promise<string> {
  const { stdout, stderr } = await inNamespace(netns, [process.execPath, '-e', ECHO_SCRIPT, address, String(port), String(options.timeoutMs)],
    options.timeoutMs + 5000)
  const result = stdout.trim()
  if (result === '') throw new Error(`the echo probe of ${address}:${port} in ${netns} said nothing: ${stderr}`)
  return result
}

/**
 * Types `command` (`ping <ipv4> [count]`, `connect <ipv4> <port>`) at a guest's serial console,
 * on its socket, and returns the line the guest prints for it (`sim.ping …`, `sim.connect …`, or
 * `sim: unknown command: …`). The console has one client at a time: this one takes it over.
 */
export async function guestProbe (consoleSocket: string, command: string, options: { timeoutMs?: number } = {}): Promise<string> {
  const socket = connect(consoleSocket)
  let output = ''
  socket.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  try {
    await once(socket, 'connect')
    socket.write(`${command}\r`)
    return await waitFor(`the guest's answer to ${command}`, async () => {
      const echoed = output.indexOf(`${command}\r\n`)
      if (echoed < 0) return null
      return /^(sim[.:][^\n]*)\n/m.exec(output.slice(echoed + command.length + 2))?.[1] ?? null
    }, { timeoutMs: options.timeoutMs ?? 30_000, intervalMs: 20, detail: () => output })
  } finally {
    socket.destroy()
  }
}
