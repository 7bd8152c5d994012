/**
 * The base images hosts announce in their heartbeats (`host_images`): what `GET /v1/images`
 * lists, what a create's boot disk is checked against, and where placement may put an instance
 * booting from one (activities/vmm-records.ts). Written by the host's heartbeat only
 * (activities/host-records.ts), with the digest of what it announced on the host's row.
 */
import type { Pool, PoolClient } from './pool.js'
import type { BaseImage } from '../domain/host-agent-api.js'
import { setImagesDigest } from './hosts.js'

export interface CatalogImage extends BaseImage {
  /** The hosts (not declared lost) that have this image with this checksum. */
  hosts: string[]
}

/**
 * Every image of the hosts not declared lost, one entry per name and checksum. An image on
 * several hosts with different contents shows once per version.
 */
export async function listImages (db: Pool, name: string | null = null): Promise<CatalogImage[]> {
  const { rows } = await db.query(
    `SELECT hi.name, hi.format, hi.virtual_size_bytes, hi.sha256, array_agg(hi.host_id ORDER BY hi.host_id) AS hosts
       FROM host_images hi JOIN hosts h ON h.id = hi.host_id
      WHERE h.status <> 'lost' AND ($1::text IS NULL OR hi.name = $1)
      GROUP BY hi.name, hi.format, hi.virtual_size_bytes, hi.sha256
      ORDER BY hi.name, count(*) DESC, hi.sha256`,
    [name]
  )
  return rows.map((row) => ({ name: row.name, format: row.format, virtualSizeBytes: row.virtual_size_bytes, sha256: row.sha256, hosts: row.hosts }))
}

/** The version of an image most hosts have; null when no host (not lost) has it. */
export async function findImage (db: Pool, name: string): Promise<CatalogImage | null> {
  return (await listImages(db, name))[0] ?? null
}

/** Replaces a host's images when what it announces changed (`digest`); one statement otherwise. */
export async function recordHostImages (tx: PoolClient, hostId: string, images: readonly BaseImage[], digest: string): Promise<void> {
  if (!await setImagesDigest(tx, hostId, digest)) return
  await tx.query('DELETE FROM host_images WHERE host_id = $1', [hostId])
  for (const image of images) {
    await tx.query(
      'INSERT INTO host_images (host_id, name, format, virtual_size_bytes, sha256) VALUES ($1, $2, $3, $4, $5)',
      [hostId, image.name, image.format, image.virtualSizeBytes, image.sha256]
    )
  }
}
