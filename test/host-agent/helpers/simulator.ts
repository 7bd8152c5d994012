/**
 * Simulated VMMs for tests: the real simulator binary (rebuilt if its sources changed), started
 * with the agent's arguments, in a fresh directory under /tmp, with small helpers to talk to its
 * API raw or through the driver. Every process started here is ended by PID in `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { request } from 'node:http'
import { connect } from 'node:net'
import { join } from 'node:path'
import { after, before } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { SIMULATOR_BINARY } from '../../../host-agent/cloud-hypervisor/binary.js'
import { vmmArguments, vmmPaths, type VmmPaths } from '../../../host-agent/cloud-hypervisor/launch.js'
import { startTimeOf } from '../../../host-agent/process/proc.js'
import { buildSimulator } from '../../../scripts/build/build-simulator.js'
import { waitUntil } from '../../../stack/wait.js'

export { SIMULATOR_BINARY, buildSimulator }

export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** A throw-away directory under /tmp (short, for socket paths), removed by the returned function. */
export async function tempDir (prefix = 'vmp-t-'): Promise<{ dir: string, remove: () => Promise<void> }> {
  const dir = await mkdtemp(join('/tmp', prefix))
  return { dir, remove: async () => { await rm(dir, { recursive: true, force: true }) } }
}

/**
 * A test file's scratch space: a directory with stand-in images, made before its tests and
 * removed after them, with a fresh subdirectory for each VMM (`nextDir`).
 */
export function useWorkspace (prefix: string): { readonly dir: string, readonly kernel: string, nextDir: () => Promise<string> } {
  let root: { dir: string, remove: () => Promise<void> }
  let kernel = ''
  let count = 0
  before(async () => {
    await buildSimulator()
    root = await tempDir(prefix)
    kernel = (await writeImages(root.dir)).kernel
  })
  after(async () => { await root.remove() })
  return {
    get dir () { return root.dir },
    get kernel () { return kernel },
    async nextDir () {
      const dir = join(root.dir, String(count++))
      await mkdir(dir)
      return dir
    }
  }
}

/** Stand-in boot images: the simulator only checks that they can be opened. */
export async function writeImages (dir: string): Promise<{ kernel: string, initramfs: string }> {
  const kernel = join(dir, 'vmlinux')
  const initramfs = join(dir, 'initrd.img')
  await writeFile(kernel, 'stand-in kernel\n')
  await writeFile(initramfs, 'stand-in initramfs\n')
  return { kernel, initramfs }
}

/** Runs the simulator, after `prefix` (as the agent's launch does: a namespace to enter, a capability drop). */
export function runSimulator (args: string[], cwd?: string, prefix: readonly string[] = []): { child: ChildProcess, exit: Promise<Exit> } {
  const [program, ...rest] = [...prefix, SIMULATOR_BINARY, ...args]
  const child = spawn(program!, rest, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  const exit = once(child, 'exit').then(([code, signal]) => ({ code, signal }) as Exit)
  return { child, exit }
}

/** Runs the simulator to completion and returns what it printed. */
export async function runToExit (args: string[]): Promise<Exit & { stdout: string, stderr: string }> {
  const { child, exit } = runSimulator(args)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  return { ...await exit, stdout, stderr }
}

export class SimulatedVmm {
  private constructor (
    readonly paths: VmmPaths,
    readonly child: ChildProcess,
    readonly exit: Promise<Exit>
  ) {}

  /** Starts a VMM in `dir` exactly as the agent does, and waits for its API socket. */
  static async start (dir: string, prefix: readonly string[] = []): Promise<SimulatedVmm> {
    const paths = vmmPaths(dir)
    const { child, exit } = runSimulator(vmmArguments(paths), dir, prefix)
    const vmm = new SimulatedVmm(paths, child, exit)
    const exited = new AbortController()
    child.once('exit', () => { exited.abort() })
    // A ping, not the socket file: a killed VMM's stale socket is there before the new one binds.
    await waitUntil('the simulator API answering', async () => (await vmm.call('GET', 'vmm.ping')).status === 200,
      { timeoutMs: 5000, intervalMs: 10, signal: exited.signal })
    return vmm
  }

  get pid (): number {
    return this.child.pid!
  }

  get running (): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** One request on a fresh connection; `body` is sent with Content-Length. */
  async call (method: string, endpoint: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number, body: string }> {
    return await callSocket(this.paths.apiSocket, method, `/api/v1/${endpoint}`, body, headers)
  }

  async callJson (method: string, endpoint: string, body?: unknown): Promise<{ status: number, json: unknown }> {
    const response = await this.call(method, endpoint, body === undefined ? undefined : JSON.stringify(body))
    return { status: response.status, json: response.body === '' ? undefined : JSON.parse(response.body) }
  }

  /** Creates and boots a VM whose kernel command line is `cmdline`. */
  async boot (kernel: string, cmdline = ''): Promise<void> {
    const created = await this.call('PUT', 'vm.create', JSON.stringify(vmConfig(kernel, cmdline, this.paths.serialLog)))
    if (created.status !== 204) throw new Error(`vm.create: ${created.status} ${created.body}`)
    const booted = await this.call('PUT', 'vm.boot')
    if (booted.status !== 204) throw new Error(`vm.boot: ${booted.status} ${booted.body}`)
  }

  /** Whether a ping goes unanswered for `waitMs` (the API is wedged). */
  async pingUnanswered (waitMs = 300): Promise<boolean> {
    const answer = await Promise.race([this.call('GET', 'vmm.ping'), sleep(waitMs, 'no answer')])
    return answer === 'no answer'
  }

  signal (signal: NodeJS.Signals): void {
    if (this.running) process.kill(this.pid, signal)
  }

  /** SIGKILLs the process if it still runs and waits for it. */
  async stop (): Promise<Exit> {
    this.signal('SIGKILL')
    return await this.exit
  }
}

export function vmConfig (kernel: string, cmdline: string, serialFile: string): unknown {
  return {
    payload: { kernel, cmdline },
    cpus: { boot_vcpus: 1, max_vcpus: 1 },
    memory: { size: 128 * 1024 * 1024 },
    serial: { mode: 'File', file: serialFile },
    console: { mode: 'Off' }
  }
}

export async function callSocket (
  socketPath: string,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {}
): Promise<{ status: number, body: string }> {
  return await new Promise((resolve, reject) => {
    const req = request({
      socketPath,
      path,
      method,
      agent: false,
      headers: { 'Content-Length': Buffer.byteLength(body ?? ''), ...headers }
    }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { text += chunk })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body: text }) })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body ?? '')
  })
}

/** Writes raw bytes on a new connection and returns everything read until the server closes it or `waitMs` passes. */
export async function rawExchange (socketPath: string, bytes: string, waitMs = 500): Promise<string> {
  const socket = connect(socketPath)
  let received = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => { received += chunk })
  socket.on('error', () => {})
  await once(socket, 'connect')
  if (bytes !== '') socket.write(bytes)
  await Promise.race([once(socket, 'close'), sleep(waitMs)])
  socket.destroy()
  return received
}

/** Whether a process with this PID exists (and is not a zombie). */
export function processExists (pid: number): boolean {
  return startTimeOf(pid) !== null
}
