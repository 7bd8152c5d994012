/**
 * The NoCloud seed cloud-init reads at boot: a small FAT image labelled CIDATA, made with
 * dosfstools and mtools as Cloud Hypervisor's own scripts and Ubicloud make it (no mount, no
 * root), holding
 *
 *   meta-data       the instance ID, the hostname and the SSH keys (`public-keys`)
 *   user-data       the user's cloud-config, or an empty one
 *   network-config  version 2: each interface matched by its MAC, with its static address, the
 *                   network's gateway as the default route and the segments' MTU (a VXLAN
 *                   segment carries 50 bytes less than the hosts' LAN: domain/network-segments.ts)
 *
 * meta-data and network-config are YAML; they are written in YAML's JSON form, which cloud-init
 * reads like any YAML and the simulator can parse without a YAML library.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { CloudInit, VmmInterface } from '../../domain/host-agent-api.js'
import { macOf } from '../../domain/interfaces.js'
import { GUEST_MTU } from '../../domain/network-segments.js'
import { runCommand } from '../process/command.js'

/** 1 MiB: room for 32 KiB of user-data with plenty to spare; FAT12 at this size. */
const SEED_KIB = 1024

export function seedFiles (instanceId: string, cloudInit: CloudInit, interfaces: readonly VmmInterface[]): Record<string, string> {
  const metaData = { 'instance-id': instanceId, 'local-hostname': cloudInit.hostname, 'public-keys': cloudInit.sshKeys }
  const ethernets = Object.fromEntries(interfaces.map((nic, index) => [`eth${index}`, {
    match: { macaddress: macOf(nic.id) },
    'set-name': `eth${index}`,
    addresses: [nic.address],
    mtu: GUEST_MTU,
    routes: [{ to: 'default', via: nic.gateway }]
  }]))
  return {
    'meta-data': JSON.stringify(metaData, null, 2) + '\n',
    'user-data': cloudInit.userData ?? '#cloud-config\n{}\n',
    'network-config': JSON.stringify({ version: 2, ethernets }, null, 2) + '\n'
  }
}

export async function buildSeed (image: string, instanceId: string, cloudInit: CloudInit, interfaces: readonly VmmInterface[]): Promise<void> {
  await writeSeedImage(image, seedFiles(instanceId, cloudInit, interfaces))
}

/** The seed image holding `files` (name to content). */
export async function writeSeedImage (image: string, files: Record<string, string>): Promise<void> {
  const staging = await mkdtemp(join(tmpdir(), 'vmplane-seed-'))
  try {
    for (const [name, content] of Object.entries(files)) await writeFile(join(staging, name), content)
    await runCommand('mkdosfs', ['-n', 'CIDATA', '-C', image, String(SEED_KIB)])
    await runCommand('mcopy', ['-o', '-i', image, ...Object.keys(files).map((name) => join(staging, name)), '::'])
  } finally {
    await rm(staging, { recursive: true, force: true })
  }
}
