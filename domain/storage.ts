/**
 * Where an instance's disks and seed live in the storage every host mounts, relative to it: named
 * by the disk's and the instance's IDs (host-agent/storage/instance-storage.ts makes them there).
 * A boot disk is a qcow2 overlay; a data disk is raw.
 */
export function diskFileOf (disk: { id: string, image?: string | null }): string {
  return `disks/${disk.id}.${disk.image === undefined || disk.image === null ? 'raw' : 'qcow2'}`
}

export function seedFileOf (instanceId: string): string {
  return `seeds/${instanceId}.img`
}

/** The guest's name for the disk in this slot: vda, vdb, … */
export function diskDeviceOf (slot: number): string {
  return `vd${String.fromCharCode(97 + slot)}`
}
