/**
 * Runs the compiled `vmplane` CLI as a person or a script would: a child process, its exit code,
 * stdout and stderr. The test's own VMPLANE_* settings are left out, and the data directory
 * points nowhere unless a test says otherwise, so only what a test passes configures the CLI.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcessByStdio } from 'node:child_process'
import type { Readable, Writable } from 'node:stream'
import { join } from 'node:path'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

const CLI = join(REPO_ROOT, 'dist', 'bin', 'vmplane.js')
const NO_DATA_DIR = '/nonexistent/vmplane-cli-test'

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

export interface CliOptions {
  /** Added to the environment; `undefined` removes a setting. */
  env?: Record<string, string | undefined>
  cwd?: string
}

export interface RunningCli {
  /** What it has written to stderr so far. */
  stderr: () => string
  result: Promise<CliResult>
}

export function startCli (args: string[], options: CliOptions = {}): RunningCli {
  const { stderr, result } = outputOf(spawn(process.execPath, [CLI, ...args], { cwd: options.cwd ?? REPO_ROOT, env: cliEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'] }))
  return { stderr, result }
}

/** What a child writes, as it comes and once it has ended. */
function outputOf (child: ChildProcessByStdio<Writable | null, Readable, Readable>): { stdout: () => string, stderr: () => string, result: Promise<CliResult> } {
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (text: string) => { stdout += text })
  child.stderr.setEncoding('utf8').on('data', (text: string) => { stderr += text })
  const result = new Promise<CliResult>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
  return { stdout: () => stdout, stderr: () => stderr, result }
}

export interface CliOnTerminal {
  /** Types into the terminal. */
  type: (text: string) => void
  /** What the terminal has shown so far. */
  screen: () => string
  result: Promise<CliResult>
}

/**
 * Runs the CLI on a pseudo-terminal, as a person at a terminal would: util-linux's `script`
 * gives it one, passes what is typed to it and what it writes back. The result's stdout is the
 * terminal's whole output.
 */
export function startCliOnTerminal (args: string[], options: CliOptions = {}): CliOnTerminal {
  const command = [process.execPath, CLI, ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(' ')
  const child = spawn('script', ['--quiet', '--flush', '--return', '--command', command, '/dev/null'], {
    cwd: options.cwd ?? REPO_ROOT, env: cliEnv(options.env), stdio: ['pipe', 'pipe', 'pipe']
  })
  const { stdout, result } = outputOf(child)
  return { type: (text) => { child.stdin.write(text) }, screen: stdout, result }
}

export async function runCli (args: string[], options: CliOptions = {}): Promise<CliResult> {
  return await startCli(args, options).result
}

function cliEnv (overrides: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: Record<string, string | undefined> = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VMPLANE_'))),
    VMPLANE_DATA_DIR: NO_DATA_DIR,
    ...overrides
  }
  return Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined))
}

/** The promise made for bad input: one line on stderr, no stack trace, nothing on stdout, this exit code. */
export function assertOneLineError (result: CliResult, exitCode: number, message: RegExp): void {
  const lines = result.stderr.split('\n').filter((line) => line !== '')
  assert.equal(lines.length, 1, `exactly one line on stderr:\n${result.stderr}`)
  assert.match(lines[0], /^vmplane: /)
  assert.match(lines[0], message)
  assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace')
  assert.equal(result.stdout, '', 'nothing on stdout')
  assert.equal(result.code, exitCode, `exit code (stderr: ${result.stderr})`)
}
