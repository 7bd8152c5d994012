/**
 * Starting a VMM process, the way Kata and the Cloud Hypervisor docs do it: no VM on the
 * command line, only the API socket, the event monitor, the log file and `-v`; the VM is
 * created and booted through the REST API afterwards.
 *
 * The process runs in its own session and process group (`detached`), with stdio ignored and
 * no shell, so it outlives the agent that started it and one SIGKILL to the group ends it.
 *
 * A prefix may go before the program (`vmmCommandPrefix`): `ip netns exec` into the host's
 * network namespace, where its TAPs are, and `setpriv` to drop CAP_NET_ADMIN, which the VMM
 * never needs since the agent makes its TAPs (a missing TAP then fails the boot instead of
 * being created by the VMM). Each execs the next, so the PID, the start time and the command
 * line the agent later recognises are the VMM's own.
 *
 * The process's working directory is its own VMM directory, and the VM config names the serial
 * socket relative to it (`SERIAL_SOCKET`). A live migration carries the VM config to the target,
 * whose VMM directory is another one on another host: an absolute path would make the target bind
 * its serial socket in the source's directory (missing there, or the source's own), while the
 * relative one lands in whichever directory the VMM runs in. The agent itself connects its console
 * relay by the absolute path (`VmmPaths.console`).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'

/** The serial port's socket as the VM config names it: relative to the VMM's working directory. */
export const SERIAL_SOCKET = 'con.sock'

/** The files of one VMM, all inside its directory. */
export interface VmmPaths {
  dir: string
  apiSocket: string
  events: string
  log: string
  /** The serial port's socket (mode Socket), `SERIAL_SOCKET` in the directory, which the agent's console relay connects to. */
  console: string
  /** What the guest printed, kept by the agent, capped in size (console/serial-console.ts). */
  serialLog: string
}

export function vmmPaths (dir: string): VmmPaths {
  return {
    dir,
    apiSocket: join(dir, 'api.sock'),
    events: join(dir, 'events'),
    log: join(dir, 'ch.log'),
    console: join(dir, SERIAL_SOCKET),
    serialLog: join(dir, 'serial.log')
  }
}

/** What goes before the program: the network namespace to enter, and the capability drop (as root). */
export function vmmCommandPrefix (netns: string | null, root: boolean): string[] {
  return [
    ...(netns === null ? [] : ['ip', 'netns', 'exec', netns]),
    ...(root ? ['setpriv', '--inh-caps=-net_admin', '--bounding-set=-net_admin', '--'] : [])
  ]
}

export function vmmArguments (paths: VmmPaths): string[] {
  return [
    '--api-socket', `path=${paths.apiSocket}`,
    '--event-monitor', `path=${paths.events}`,
    '--log-file', paths.log,
    '-v'
  ]
}

export function launchVmm (binary: string, paths: VmmPaths, prefix: readonly string[] = []): ChildProcess {
  const [program, ...args] = [...prefix, binary, ...vmmArguments(paths)]
  const child = spawn(program!, args, {
    // The VM config's serial socket is relative to this (see the module comment).
    cwd: paths.dir,
    detached: true,
    stdio: 'ignore',
    shell: false
  })
  // The agent must be able to exit (or restart) while its VMMs live on.
  child.unref()
  return child
}

/**
 * The API socket path of a cloud-hypervisor command line (argv from /proc/<pid>/cmdline), or
 * null when it is not one: the agent uses it to recognise the VMM processes it started.
 */
export function apiSocketOfCommandLine (argv: readonly string[]): string | null {
  const program = argv[0]?.split('/').pop() ?? ''
  if (!program.startsWith('cloud-hypervisor')) return null
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i]!
    let value: string | undefined
    if (arg === '--api-socket') value = argv[i + 1]
    else if (arg.startsWith('--api-socket=')) value = arg.slice('--api-socket='.length)
    if (value === undefined) continue
    if (!value.includes('=')) return value
    const path = value.split(',').find((part) => part.startsWith('path='))
    return path === undefined ? null : path.slice('path='.length)
  }
  return null
}
