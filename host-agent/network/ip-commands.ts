/**
 * iproute2, and the other tools that act on a network namespace (nft, sysctl), run in the host's:
 * the one the agent runs in, or the one `VMPLANE_AGENT_NETNS` names (the tests give each
 * simulated host its own).
 */
import { runCommand } from '../process/command.js'

/** A link as `ip -json -details link` describes it (the fields vmplane reads). */
export interface IpLink {
  ifname: string
  mtu?: number
  flags?: string[]
  master?: string
  linkinfo?: { info_kind?: string, info_data?: { type?: string, multi_queue?: boolean } }
}

export class IpCommands {
  constructor (readonly netns: string | null) {}

  async links (args: string[]): Promise<IpLink[]> {
    return JSON.parse(await this.run(['-json', '-details', 'link', ...args])) as IpLink[]
  }

  async run (args: string[]): Promise<string> {
    return await runCommand('ip', [...this.#inNamespace(), ...args])
  }

  /** Several ip commands, one per line, run in order by one ip; it stops at the first that fails. */
  async batch (commands: string[][]): Promise<void> {
    if (commands.length === 0) return
    await runCommand('ip', [...this.#inNamespace(), '-batch', '-'], { input: commands.map((args) => args.join(' ')).join('\n') + '\n' })
  }

  /** Another program, in the namespace (`ip netns exec`); `input` is what it reads on its standard input. */
  async exec (command: string, args: string[], input?: string): Promise<string> {
    const [program, ...rest] = this.netns === null ? [command, ...args] : ['ip', 'netns', 'exec', this.netns, command, ...args]
    return await runCommand(program!, rest, input === undefined ? {} : { input })
  }

  where (): string {
    return this.netns === null ? "the agent's network namespace" : `network namespace ${this.netns}`
  }

  #inNamespace (): string[] {
    return this.netns === null ? [] : ['-n', this.netns]
  }
}
