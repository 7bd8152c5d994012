/**
 * What a VMM needs on the host before it starts, made from its spec (I3: each thing named by the
 * ID of the decision that made it, made if missing, found if there):
 *
 * - its kernel and initramfs, resolved inside the image directory;
 * - its disks (storage/instance-storage.ts), in the guest's order, then the cloud-init seed;
 * - a TAP per interface (network/taps.ts), with the multi-queue flag `num_queues` needs, on its
 *   network's segment (network/segments.ts), made first if this is the network's first VMM here;
 * - the host's firewall rebuilt with its networks (network/host-firewall.ts), before the VMM runs.
 *
 * `release` removes the TAPs once the VMM is gone; `applyPolicies`, once it is recorded ended,
 * the segments no other TAP or route wants, and rebuilds the firewall without it; disks and seeds outlive VMMs (they persist
 * across stop and start) and go only when the control plane deletes them.
 *
 * A live migration's target (`prepareIncoming`) makes its TAPs, with the names the VM config in
 * the migration stream carries (they derive from the interfaces' IDs, the same on every host), but
 * never a disk or a seed: those must already be in the shared storage, as the source uses them.
 * One made here would be new and empty (a fresh overlay of the base image), and the VM would
 * silently run on it in place of its own disk.
 */
import type { VmmSpec } from '../../domain/host-agent-api.js'
import { macOf, netQueuesFor, tapNameOf } from '../../domain/interfaces.js'
import type { ResolvedBootFiles, ResolvedNet } from '../cloud-hypervisor/vm-config.js'
import type { ImageResolver } from '../images.js'
import type { HostFirewall } from '../network/host-firewall.js'
import type { NetworkSegments } from '../network/segments.js'
import type { TapDevices } from '../network/taps.js'
import type { InstanceStorage } from '../storage/instance-storage.js'

export class VmmDevices {
  constructor (
    readonly images: ImageResolver,
    readonly storage: InstanceStorage,
    readonly taps: TapDevices,
    readonly segments: NetworkSegments,
    readonly firewall: HostFirewall
  ) {}

  /**
   * Checks what the spec names from the image directory, before anything is recorded or made:
   * an ImageError is the caller's mistake. A boot disk already made needs its base image no more
   * (the overlay's backing file is in the storage).
   */
  async check (spec: VmmSpec, incoming: boolean): Promise<void> {
    await this.images.resolve(spec.boot.kernel)
    if (spec.boot.initramfs !== undefined) await this.images.resolve(spec.boot.initramfs)
    // A target never makes its disks, so it needs no base image: a missing disk fails it instead.
    if (incoming) return
    for (const disk of spec.disks ?? []) {
      if (disk.image !== undefined && !await this.storage.hasDisk(disk)) await this.images.baseImage(disk.image)
    }
  }

  async prepare (instanceId: string, spec: VmmSpec): Promise<ResolvedBootFiles> {
    const kernel = await this.images.resolve(spec.boot.kernel)
    const initramfs = spec.boot.initramfs === undefined ? null : await this.images.resolve(spec.boot.initramfs)
    const disks = []
    for (const disk of spec.disks ?? []) disks.push(await this.storage.ensureDisk(disk))
    const interfaces = spec.interfaces ?? []
    if (spec.cloudInit !== undefined) disks.push(await this.storage.ensureSeed(instanceId, spec.cloudInit, interfaces))
    const nets = await this.#ensureTaps(spec)
    return { kernel, initramfs, disks, nets }
  }

  /** What a migration's target needs before it starts: its disks and seed found, its TAPs made. */
  async prepareIncoming (instanceId: string, spec: VmmSpec): Promise<void> {
    const missing: string[] = []
    for (const disk of spec.disks ?? []) if (!await this.storage.hasDisk(disk)) missing.push(`disk ${disk.id}`)
    if (spec.cloudInit !== undefined && !await this.storage.hasSeed(instanceId)) missing.push(`the cloud-init seed of instance ${instanceId}`)
    if (missing.length > 0) {
      throw new Error(`${missing.join(' and ')} not found in the storage; a migration's target uses the source's and never makes one`)
    }
    await this.#ensureTaps(spec)
  }

  async #ensureTaps (spec: VmmSpec): Promise<ResolvedNet[]> {
    const interfaces = spec.interfaces ?? []
    const numQueues = netQueuesFor(spec.vcpus)
    for (const nic of interfaces) {
      const gateway = `${nic.gateway}/${nic.address.split('/')[1]!}`
      await this.segments.attach(nic.vni, gateway, async (bridge) => { await this.taps.ensure(tapNameOf(nic.id), numQueues > 2, bridge) })
    }
    if (interfaces.length > 0) await this.applyPolicies()
    return interfaces.map((nic) => ({ tap: tapNameOf(nic.id), mac: macOf(nic.id), numQueues }))
  }

  /**
   * Removes the VMM's TAPs; what cannot be removed now is left for the reconciler. Its segments
   * and firewall rules go at the `applyPolicies` that follows its end, once it no longer counts
   * among the live VMMs whose policies keep the segments they route to.
   */
  async release (spec: VmmSpec): Promise<void> {
    for (const nic of spec.interfaces ?? []) await this.taps.remove(tapNameOf(nic.id))
  }

  /**
   * Brings the host's networks to what its live VMMs and their policies say: the segments their
   * policies route to joined, those nothing uses any more removed, the firewall rebuilt.
   */
  async applyPolicies (): Promise<void> {
    await this.segments.joinRoutes()
    await this.segments.prune()
    await this.firewall.rebuild()
  }
}
