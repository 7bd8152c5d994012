/**
 * A create's disks, interfaces and cloud-init, from what the request names to what the instance's
 * rows are made of: the boot disk's image checked against what the hosts announce (and its size
 * against the image's), each network found by name or ID, the default interface added, and every
 * disk and interface given its ID now (`newId`, so a retry with the same Idempotency-Key names the
 * same ones, I3). What cannot be allocated when the rows are inserted (db/instances.ts) comes
 * back as a problem naming the request's field.
 */
import { findImage } from '../../db/images.js'
import type { InsertProblem } from '../../db/instances.js'
import { findNetworkId } from '../../db/networks.js'
import type { Pool } from '../../db/pool.js'
import type { CloudInitInput } from '../../domain/instance.js'
import { DEFAULT_NETWORK } from '../../domain/interfaces.js'
import { BOOT_DISK_NAME } from '../../domain/limits.js'
import type { QuotaResource } from '../../domain/projects.js'
import type { NewDisk, NewInterface } from '../../domain/requests.js'
import { ApiProblem } from '../plugins/problem-details.js'
import type { NewId } from '../plugins/idempotency.js'

const GIB = 1024 ** 3

export interface ResourcesInput {
  bootDisk?: { image: string, sizeGiB?: number }
  dataDisks: Array<{ name: string, sizeGiB: number }>
  interfaces?: Array<{ network: string, ip?: string }>
  sshKeys?: string[]
  userData?: string
}

export interface InstanceResources {
  disks: NewDisk[]
  interfaces: NewInterface[]
  cloudInit: CloudInitInput | null
}

function invalid (status: 409 | 422, path: string, message: string): ApiProblem {
  return new ApiProblem(status, status === 409 ? 'Conflict' : 'Unprocessable Content', `${path}: ${message}`, [{ path, message }])
}

export async function resolveResources (db: Pool, projectId: string, input: ResourcesInput, newId: NewId): Promise<InstanceResources> {
  const disks: NewDisk[] = []
  if (input.bootDisk !== undefined) {
    const image = await findImage(db, input.bootDisk.image)
    if (image === null) throw invalid(422, 'body.bootDisk.image', `no host has an image named ${input.bootDisk.image} (GET /v1/images lists them)`)
    const imageGiB = Math.max(1, Math.ceil(image.virtualSizeBytes / GIB))
    const sizeGiB = input.bootDisk.sizeGiB ?? imageGiB
    if (sizeGiB < imageGiB) throw invalid(422, 'body.bootDisk.sizeGiB', `must be at least the image's virtual size, ${imageGiB} GiB`)
    disks.push({ id: newId(`disk/${BOOT_DISK_NAME}`), name: BOOT_DISK_NAME, slot: 0, image: image.name, imageSha256: image.sha256, sizeGiB })
  }
  for (const disk of input.dataDisks) {
    disks.push({ id: newId(`disk/${disk.name}`), name: disk.name, slot: disks.length, image: null, imageSha256: null, sizeGiB: disk.sizeGiB })
  }

  const interfaces: NewInterface[] = []
  if (input.interfaces === undefined) {
    const networkId = await findNetworkId(db, projectId, DEFAULT_NETWORK)
    if (networkId !== null) interfaces.push({ id: newId('interface/0'), slot: 0, networkId, ip: null })
  } else {
    for (const [slot, nic] of input.interfaces.entries()) {
      const networkId = await findNetworkId(db, projectId, nic.network)
      if (networkId === null) throw invalid(422, `body.interfaces.${slot}.network`, `no network ${nic.network} in this project (GET …/networks lists them)`)
      interfaces.push({ id: newId(`interface/${slot}`), slot, networkId, ip: nic.ip ?? null })
    }
  }

  const cloudInit = input.bootDisk === undefined
    ? null
    : { sshKeys: input.sshKeys ?? [], ...(input.userData === undefined ? {} : { userData: input.userData }) }
  return { disks, interfaces, cloudInit }
}

/** The answer to rows that could not be inserted, naming the request's field. */
export function insertProblemAnswer (problem: InsertProblem, name: string, disks: readonly NewDisk[]): ApiProblem {
  switch (problem.kind) {
    case 'name-taken':
      return new ApiProblem(409, 'Conflict', `an instance named ${name} already exists`)
    case 'project-gone':
      return new ApiProblem(404, 'Not Found', 'the project was deleted')
    case 'over-quota':
      return overQuota(problem)
    case 'storage-full': {
      const disk = disks[problem.disk]!
      const dataIndex = disks.filter((d) => d.image === null).indexOf(disk)
      return invalid(409, disk.image === null ? `body.dataDisks.${dataIndex}.sizeGiB` : 'body.bootDisk.sizeGiB', problem.message)
    }
    case 'network-gone':
      return invalid(422, `body.interfaces.${problem.interface}.network`, problem.message)
    case 'address-invalid':
      return invalid(422, `body.interfaces.${problem.interface}.ip`, problem.message)
    case 'address-taken':
      return invalid(409, `body.interfaces.${problem.interface}.ip`, problem.message)
    case 'no-free-address':
      return invalid(409, `body.interfaces.${problem.interface}.network`, problem.message)
    case 'mac-taken':
      return invalid(409, `body.interfaces.${problem.interface}`, problem.message)
  }
}

/** Where each quota's resource comes from in a create's body. */
const QUOTA_FIELDS: Record<QuotaResource, string> = {
  vcpus: 'body.vcpus',
  memoryMiB: 'body.memoryMiB',
  diskGiB: 'body.bootDisk.sizeGiB',
  instances: 'body',
  addresses: 'body.interfaces'
}

/** 409, naming each quota the create would pass: its limit, its use, and what the create needs. */
function overQuota ({ exceeded, quotas, charge }: Extract<InsertProblem, { kind: 'over-quota' }>): ApiProblem {
  const errors = exceeded.map((resource) => ({
    path: QUOTA_FIELDS[resource],
    message: `the project's quota on ${resource} is ${quotas.limits[resource]}: ${quotas.use[resource]} in use, and this instance needs ${charge[resource]}`
  }))
  return new ApiProblem(409, 'Conflict', `over the project's quota: ${errors.map((e) => e.message).join('; ')}`, errors)
}
