/**
 * A station on a dev stack's LAN, "the outside" of its guests' networks (docs/design.md §19): a
 * network namespace of the stack's own (`vmp-<hash>-outside`, removed with the stack's network)
 * whose port is on the LAN's bridge, with an address of the LAN and a TCP echo service, run by
 * Node inside it. Guests with a way out reach it; it tries to reach guests.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { toAddress, parseCidr } from '../../domain/ipv4.js'
import { runCommand } from '../../host-agent/process/command.js'
import { stackPrefixOf } from '../../stack/host-network.js'
import { LAN_BRIDGE, type StackLan } from '../../stack/stack-lan.js'

/** The station is <net>.5: .1 is the root namespace's, hosts begin at .10. */
const STATION_OCTET = 5

/** Echoes what each connection sends, and prints the address each came from. */
const ECHO_SERVER = `
const net = require('node:net')
net.createServer((socket) => { console.log('from ' + socket.remoteAddress); socket.pipe(socket) })
  .listen(Number(process.argv[1]), '0.0.0.0', () => console.log('listening'))
`

export class OutsideStation {
  readonly #seen: string[] = []

  private constructor (readonly netns: string, readonly address: string, private readonly server: ChildProcess) {
    server.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) if (line.startsWith('from ')) this.#seen.push(line.slice(5))
    })
  }

  static async start (lan: StackLan, echoPort: number): Promise<OutsideStation> {
    const netns = `${stackPrefixOf(lan.netns)!}outside`
    const address = toAddress(parseCidr(lan.subnet).base + STATION_OCTET)
    await runCommand('ip', ['netns', 'add', netns])
    await runCommand('ip', ['-n', netns, '-batch', '-'], {
      input: [
        `link add eth0 type veth peer name outside netns ${lan.netns}`,
        `addr add ${address}/24 dev eth0`,
        'link set eth0 up',
        'link set lo up'
      ].join('\n') + '\n'
    })
    await runCommand('ip', ['-n', lan.netns, 'link', 'set', 'outside', 'master', LAN_BRIDGE, 'up'])
    const server = spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', ECHO_SERVER, String(echoPort)], { stdio: ['ignore', 'pipe', 'inherit'] })
    const [line] = await Promise.race([once(server.stdout!, 'data'), once(server, 'exit').then(() => ['exited'])])
    if (!String(line).includes('listening')) throw new Error(`the outside station's echo service did not start: ${String(line)}`)
    return new OutsideStation(netns, address, server)
  }

  /** The addresses connections to the echo service came from, in order. */
  get connectionsFrom (): readonly string[] {
    return this.#seen
  }

  /** Routes `cidr` through `via` (a host's LAN address), as a router of the outside that knew of the guests would. */
  async route (cidr: string, via: string): Promise<void> {
    await runCommand('ip', ['-n', this.netns, 'route', 'replace', cidr, 'via', via])
  }

  async stop (): Promise<void> {
    this.server.kill()
    await runCommand('ip', ['netns', 'del', this.netns]).catch(() => {})
  }
}
