/**
 * `npm start`: install and build what is missing or stale, then run the dev stack
 * (`dist/stack/dev-stack.js`) in the foreground until Ctrl-C or SIGTERM.
 *
 * Signals: Ctrl-C on a terminal goes to the whole foreground process group, which includes the
 * dev stack, so SIGINT is not passed on from here (the stack would see it twice and take the
 * second for "kill everything now"). SIGTERM and SIGHUP, which are sent to this process alone,
 * are passed on. npm itself does not pass SIGTERM on to the script it runs: `kill <npm's PID>`
 * only ends npm. So when the process that started this one is gone, the stack is stopped as if
 * it had been sent SIGTERM, rather than left running with nobody to stop it.
 */
import { spawn } from 'node:child_process'
import { constants } from 'node:os'
import { REPO_ROOT, ensureBuilt, ensureInstalled } from './tools/bootstrap.mjs'

ensureInstalled()
ensureBuilt()
// The host agents make disks, seeds and TAPs, and the stack its hosts' LAN, with Debian's tools;
// installed here if missing.
const { ensureHostTools } = await import('../dist/stack/host-tools.js')
await ensureHostTools({ log: console.log })

const stack = spawn(process.execPath, ['dist/stack/dev-stack.js'], { cwd: REPO_ROOT, stdio: 'inherit' })
process.on('SIGINT', () => {})
for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => stack.kill(signal))
const parent = process.ppid
setInterval(() => { if (process.ppid !== parent) stack.kill('SIGTERM') }, 1000).unref()
stack.on('exit', (code, signal) => process.exit(code ?? 128 + constants.signals[signal]))
