/**
 * Projects: what owns instances and networks, and everything made for them (docs/design.md §18).
 * `default` holds what was made before projects existed and what the deprecated unscoped paths
 * make; its ID is fixed (db/migrations/013.do.projects.sql), so a create workflow recorded before
 * projects, whose input names none, makes its rows there.
 */

export const DEFAULT_PROJECT_ID = '00000000-0000-4000-8000-000000000000'
export const DEFAULT_PROJECT_NAME = 'default'

export interface Project {
  id: string
  name: string
}

export const DEFAULT_PROJECT: Project = { id: DEFAULT_PROJECT_ID, name: DEFAULT_PROJECT_NAME }

/** The resources a project's quotas bound, and what they count. */
export const QUOTA_RESOURCES = ['vcpus', 'memoryMiB', 'diskGiB', 'instances', 'addresses'] as const
export type QuotaResource = typeof QUOTA_RESOURCES[number]

/** A limit per resource; null: no limit. */
export type QuotaLimits = Record<QuotaResource, number | null>
export type QuotaUse = Record<QuotaResource, number>

/** What one instance is charged: its vCPUs and memory, its disks' size, one instance, its addresses. */
export function chargeOf (instance: { vcpus: number, memoryMiB: number, disks?: ReadonlyArray<{ sizeGiB: number }>, interfaces?: readonly unknown[] }): QuotaUse {
  return {
    vcpus: instance.vcpus,
    memoryMiB: instance.memoryMiB,
    diskGiB: (instance.disks ?? []).reduce((sum, disk) => sum + disk.sizeGiB, 0),
    instances: 1,
    addresses: (instance.interfaces ?? []).length
  }
}

/** The resources whose limit the charge would pass, given the use before it. */
export function exceededBy (charge: QuotaUse, limits: QuotaLimits, use: QuotaUse): QuotaResource[] {
  return QUOTA_RESOURCES.filter((resource) => {
    const limit = limits[resource]
    return limit !== null && use[resource] + charge[resource] > limit
  })
}
