/**
 * The host's TAP devices, made with iproute2 before a VMM starts and removed once it is gone.
 *
 * Each interface's TAP is named after the interface (domain/interfaces.ts), so a retry or a
 * restarted agent finds the one it made. It is created persistent, owned by root, with
 * `vnet_hdr` and with `multi_queue` exactly when the VMM will open more than one queue pair
 * (Cloud Hypervisor refuses a TAP whose flag does not match), attached to the host's bridge and
 * brought UP (one run of ip does both); so the VMM, which runs without CAP_NET_ADMIN, only has
 * to open it. One found detached or down (a crash between, an operator) is attached again.
 *
 * All of this happens in the host's network namespace: the one the agent runs in, or the one
 * `VMPLANE_AGENT_NETNS` names (the dev stack and the tests give each simulated host its own),
 * where the VMM runs too.
 */
import { isVmplaneTapName } from '../../domain/interfaces.js'
import { crashPoint } from '../../faults/crash-points.js'
import { runCommand } from '../process/command.js'

export interface TapDevice {
  name: string
  multiQueue: boolean
  bridge: string | null
  up: boolean
}

interface IpLink {
  ifname: string
  flags?: string[]
  master?: string
  linkinfo?: { info_kind?: string, info_data?: { type?: string, multi_queue?: boolean } }
}

export class TapDevices {
  /** The change in flight on each TAP name: an ensure and a removal of one name never interleave. */
  readonly #inFlight = new Map<string, Promise<unknown>>()

  constructor (readonly netns: string | null, readonly bridge: string) {}

  /** Checks the bridge exists in the namespace (at start-up, so a mistake shows at once). */
  async checkBridge (): Promise<void> {
    const links = await this.#links(['show', 'dev', this.bridge]).catch(() => [])
    if (links.length === 0 || links[0]?.linkinfo?.info_kind !== 'bridge') {
      throw new Error(`no bridge ${this.bridge} in ${this.#where()} (VMPLANE_AGENT_BRIDGE)`)
    }
  }

  /** The TAP, made (or repaired: attached, UP) if it is missing. */
  async ensure (name: string, multiQueue: boolean): Promise<void> {
    await this.#serially(name, async () => { await this.#ensure(name, multiQueue) })
  }

  /** Removes the TAP, unless `keep()` says otherwise once no other change of it is in flight; false when there was none. */
  async remove (name: string, keep: () => boolean = () => false): Promise<boolean> {
    return await this.#serially(name, async () => !keep() && await this.#remove(name))
  }

  /**
   * A boot's TAP is almost always new, so it is made and attached first, by one run of ip (its
   * batch mode): an ip is a process the agent spawns, about 10 ms of its CPU, a cost every boot
   * pays, and looking first took another. A TAP that exists makes `tuntap add` fail (busy, even
   * when nothing has it open), and only then is it looked at.
   */
  async #ensure (name: string, multiQueue: boolean): Promise<void> {
    const make = ['tuntap', 'add', 'dev', name, 'mode', 'tap', 'user', '0', 'vnet_hdr', ...(multiQueue ? ['multi_queue'] : [])]
    const attach = ['link', 'set', 'dev', name, 'master', this.bridge, 'up']
    const made = await this.#ipBatch([make, attach]).then(() => true, () => false)
    if (made || await this.#repair(name, multiQueue, make, attach)) crashPoint('agent.tap.after-create')
  }

  /**
   * A TAP ip could not make: one that exists is attached and brought UP if it is not, or made
   * again if it was made for another queue count; true when it was made. None found means the
   * batch failed for another reason, which trying it again reports.
   */
  async #repair (name: string, multiQueue: boolean, make: string[], attach: string[]): Promise<boolean> {
    const tap = await this.find(name)
    if (tap !== null && tap.multiQueue === multiQueue) {
      if (tap.bridge !== this.bridge || !tap.up) await this.#ip(attach)
      return false
    }
    // Made for another queue count (the instance was resized): a TAP's flags cannot change.
    if (tap !== null) await this.#remove(name)
    await this.#ipBatch([make, attach])
    return true
  }

  async #remove (name: string): Promise<boolean> {
    if (await this.find(name) === null) return false
    await this.#ip(['link', 'del', 'dev', name])
    return true
  }

  async #serially<T> (name: string, change: () => Promise<T>): Promise<T> {
    const previous = this.#inFlight.get(name) ?? Promise.resolve()
    const next = previous.catch(() => {}).then(change)
    this.#inFlight.set(name, next)
    try {
      return await next
    } finally {
      if (this.#inFlight.get(name) === next) this.#inFlight.delete(name)
    }
  }

  async find (name: string): Promise<TapDevice | null> {
    const links = await this.#links(['show', 'dev', name]).catch(() => [])
    const link = links[0]
    return link === undefined || link.linkinfo?.info_kind !== 'tun' ? null : toTap(link)
  }

  /** Every TAP with a name vmplane gives. */
  async list (): Promise<TapDevice[]> {
    const links = await this.#links(['show', 'type', 'tun'])
    return links.filter((link) => isVmplaneTapName(link.ifname)).map(toTap)
  }

  async #links (args: string[]): Promise<IpLink[]> {
    return JSON.parse(await this.#ip(['-json', '-details', 'link', ...args])) as IpLink[]
  }

  async #ip (args: string[]): Promise<string> {
    return await runCommand('ip', [...this.#inNamespace(), ...args])
  }

  /** Several ip commands, one per line, run in order by one ip; it stops at the first that fails. */
  async #ipBatch (commands: string[][]): Promise<void> {
    await runCommand('ip', [...this.#inNamespace(), '-batch', '-'], { input: commands.map((args) => args.join(' ')).join('\n') + '\n' })
  }

  #inNamespace (): string[] {
    return this.netns === null ? [] : ['-n', this.netns]
  }

  #where (): string {
    return this.netns === null ? "the agent's network namespace" : `network namespace ${this.netns}`
  }
}

function toTap (link: IpLink): TapDevice {
  return {
    name: link.ifname,
    multiQueue: link.linkinfo?.info_data?.multi_queue === true,
    bridge: link.master ?? null,
    up: link.flags?.includes('UP') ?? false
  }
}
