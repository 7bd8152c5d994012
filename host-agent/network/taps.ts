/**
 * The host's TAP devices, made with iproute2 before a VMM starts and removed once it is gone.
 *
 * Each interface's TAP is named after the interface (domain/interfaces.ts), so a retry or a
 * restarted agent finds the one it made. It is created persistent, owned by root, with
 * `vnet_hdr` and with `multi_queue` exactly when the VMM will open more than one queue pair
 * (Cloud Hypervisor refuses a TAP whose flag does not match), with the guests' MTU, attached to
 * its network's bridge (network/segments.ts, which holds the segment's lock meanwhile) and brought
 * UP (one run of ip does both); so the VMM, which runs without CAP_NET_ADMIN, only has to open it.
 * One found detached, on another bridge or down (a crash between, an operator) is attached again.
 *
 * All of this happens in the host's network namespace (network/ip-commands.ts), where the VMM runs too.
 */
import { isVmplaneTapName } from '../../domain/interfaces.js'
import { GUEST_MTU } from '../../domain/network-segments.js'
import { crashPoint } from '../../faults/crash-points.js'
import { OneAtATime } from './one-at-a-time.js'
import { IpCommands, type IpLink } from './ip-commands.js'

export interface TapDevice {
  name: string
  multiQueue: boolean
  bridge: string | null
  up: boolean
}

export class TapDevices {
  /** An ensure and a removal of one TAP never interleave. */
  readonly #oneAtATime = new OneAtATime<string>()
  readonly #ip: IpCommands

  constructor (readonly netns: string | null) {
    this.#ip = new IpCommands(netns)
  }

  /** The TAP, made (or repaired: attached to `bridge`, UP) if it is missing. */
  async ensure (name: string, multiQueue: boolean, bridge: string): Promise<void> {
    await this.#oneAtATime.run(name, async () => { await this.#ensure(name, multiQueue, bridge) })
  }

  /** Removes the TAP, unless `keep()` says otherwise once no other change of it is in flight; false when there was none. */
  async remove (name: string, keep: () => boolean = () => false): Promise<boolean> {
    return await this.#oneAtATime.run(name, async () => !keep() && await this.#remove(name))
  }

  /**
   * A boot's TAP is almost always new, so it is made and attached first, by one run of ip (its
   * batch mode): an ip is a process the agent spawns, about 10 ms of its CPU, a cost every boot
   * pays, and looking first took another. A TAP that exists makes `tuntap add` fail (busy, even
   * when nothing has it open), and only then is it looked at.
   */
  async #ensure (name: string, multiQueue: boolean, bridge: string): Promise<void> {
    const make = ['tuntap', 'add', 'dev', name, 'mode', 'tap', 'user', '0', 'vnet_hdr', ...(multiQueue ? ['multi_queue'] : [])]
    const attach = ['link', 'set', 'dev', name, 'mtu', String(GUEST_MTU), 'master', bridge, 'up']
    const made = await this.#ip.batch([make, attach]).then(() => true, () => false)
    if (made || await this.#repair(name, multiQueue, bridge, make, attach)) crashPoint('agent.tap.after-create')
  }

  /**
   * A TAP ip could not make: one that exists is attached and brought UP if it is not, or made
   * again if it was made for another queue count; true when it was made. None found means the
   * batch failed for another reason, which trying it again reports.
   */
  async #repair (name: string, multiQueue: boolean, bridge: string, make: string[], attach: string[]): Promise<boolean> {
    const tap = await this.find(name)
    if (tap !== null && tap.multiQueue === multiQueue) {
      if (tap.bridge !== bridge || !tap.up) await this.#ip.run(attach)
      return false
    }
    // Made for another queue count (the instance was resized): a TAP's flags cannot change.
    if (tap !== null) await this.#remove(name)
    await this.#ip.batch([make, attach])
    return true
  }

  async #remove (name: string): Promise<boolean> {
    if (await this.find(name) === null) return false
    await this.#ip.run(['link', 'del', 'dev', name])
    return true
  }

  async find (name: string): Promise<TapDevice | null> {
    const links = await this.#ip.links(['show', 'dev', name]).catch(() => [])
    const link = links[0]
    return link === undefined || link.linkinfo?.info_kind !== 'tun' ? null : toTap(link)
  }

  /** Every TAP with a name vmplane gives. */
  async list (): Promise<TapDevice[]> {
    const links = await this.#ip.links(['show', 'type', 'tun'])
    return links.filter((link) => isVmplaneTapName(link.ifname)).map(toTap)
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
