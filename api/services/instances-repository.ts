/**
 * What the API reads: instances with their active VMM and the operation in flight, operations
 * and hosts. One query per request, paged by keyset so a page costs the same at any depth.
 */
import fp from 'fastify-plugin'
import type { z } from 'zod'
import type { Pool } from '../../db/pool.js'
import {
  EVENT_COLUMNS, HOST_COLUMNS, INSTANCE_COLUMNS, MIGRATION_JOINS, MIGRATION_JSON, OPERATION_COLUMNS,
  isoOrNull, toEvent, toHost, toInstance, toMigration, toOperation
} from '../../db/rows.js'
import { conditionsOf } from '../../domain/conditions.js'
import type { InstanceDisk, InstanceInterface, InstanceState } from '../../domain/instance.js'
import { tapNameOf } from '../../domain/interfaces.js'
import { diskDeviceOf, diskFileOf } from '../../domain/storage.js'
import type { Operation } from '../../domain/operation.js'
import type { hostSchema } from '../schemas/hosts.js'
import type { instanceSchema } from '../schemas/instances.js'
import { migrationView, type MigrationView } from '../schemas/migrations.js'
import { ApiProblem } from '../plugins/problem-details.js'

export type InstanceView = z.infer<typeof instanceSchema>
export type HostView = z.infer<typeof hostSchema>

const INSTANCE_VIEW_QUERY = `
  SELECT ${INSTANCE_COLUMNS}, i.seq,
         v.id AS vmm_id, v.host_id AS vmm_host_id, v.state AS vmm_state, v.reason AS vmm_reason, v.exit AS vmm_exit,
         v.unresponsive_since AS vmm_unresponsive_since, h.status AS host_status, h.status_since AS host_status_since,
         h.contact_failing_since AS host_contact_failing_since,
         to_jsonb(o) AS operation, mg.migration
    FROM instances i
    LEFT JOIN vmms v ON v.id = i.active_vmm_id
    LEFT JOIN hosts h ON h.id = v.host_id
    LEFT JOIN LATERAL (
      SELECT ${OPERATION_COLUMNS} FROM operations o
       WHERE o.instance_id = i.id AND o.finished_at IS NULL
       ORDER BY o.started_at DESC LIMIT 1
    ) o ON true
    LEFT JOIN LATERAL (
      SELECT ${MIGRATION_JSON} AS migration FROM migrations m ${MIGRATION_JOINS}
       WHERE m.instance_id = i.id AND m.finished_at IS NULL
    ) mg ON true`

function toInstanceView (row: Record<string, any>, unreachableAfterMs: number): InstanceView {
  const { generation: _generation, activeVmmId: _activeVmmId, restartAttempts: _restartAttempts, disks, interfaces, cloudInit, ...instance } = toInstance(row)
  const vmm = row.vmm_id === null
    ? null
    : { id: row.vmm_id, hostId: row.vmm_host_id, state: row.vmm_state, reason: row.vmm_reason, exit: row.vmm_exit }
  return {
    ...instance,
    disks: disks.map(diskView),
    interfaces: interfaces.map(interfaceView),
    cloudInit: cloudInit === null ? null : { sshKeys: cloudInit.sshKeys, userDataBytes: Buffer.byteLength(cloudInit.userData ?? '') },
    vmm,
    operation: row.operation === null ? null : operationFromJson(row.operation),
    migration: row.migration === null ? null : migrationView(toMigration(row.migration)),
    conditions: conditionsOf({
      state: instance.state,
      lastError: instance.lastError,
      restartAt: instance.restartAt,
      vmm: vmm === null ? null : { state: vmm.state, unresponsiveSince: row.vmm_unresponsive_since },
      host: vmm === null
        ? null
        : { id: vmm.hostId, status: row.host_status, statusSince: row.host_status_since, contactFailingSince: row.host_contact_failing_since },
      now: Date.now(),
      unreachableAfterMs
    })
  }
}

function diskView (disk: InstanceDisk): InstanceView['disks'][number] {
  return {
    id: disk.id,
    name: disk.name,
    device: diskDeviceOf(disk.slot),
    image: disk.image,
    sizeGiB: disk.sizeGiB,
    state: disk.destroyedAt !== null ? 'destroyed' : disk.madeAt !== null ? 'ready' : 'pending',
    location: diskFileOf(disk)
  }
}

function interfaceView (nic: InstanceInterface): InstanceView['interfaces'][number] {
  return {
    id: nic.id,
    name: `eth${nic.slot}`,
    network: { id: nic.networkId, name: nic.networkName },
    ip: nic.ip,
    prefixLength: nic.prefixLength,
    gateway: nic.gateway,
    mac: nic.mac,
    tap: tapNameOf(nic.id),
    released: nic.releasedAt !== null
  }
}

const HOST_VIEW_QUERY = `
  SELECT ${HOST_COLUMNS}, h.cordoned_at,
         (SELECT count(*) FROM vmms v WHERE v.host_id = h.id AND v.state NOT IN ('destroyed', 'failed', 'lost'))::int AS live_vmms,
         (SELECT to_jsonb(d) FROM drains d WHERE d.host_id = h.id ORDER BY d.started_at DESC LIMIT 1) AS drain
    FROM hosts h`

function toHostView (row: Record<string, any>): HostView {
  const { vcpus, memoryMiB, ...host } = toHost(row)
  const drain = row.drain as Record<string, any> | null
  return {
    ...host,
    capacity: { vcpus, memoryMiB },
    liveVmms: row.live_vmms,
    cordonedAt: row.cordoned_at === null ? null : new Date(row.cordoned_at).toISOString(),
    drain: drain === null
      ? null
      : {
          id: drain.id,
          status: drain.status,
          instancesFound: drain.total,
          migrated: drain.migrated,
          failed: drain.failed,
          lastError: drain.last_error,
          startedAt: isoOrNull(drain.started_at)!,
          finishedAt: isoOrNull(drain.finished_at)
        }
  }
}

/** `to_jsonb` renders timestamps in PostgreSQL's format; the API speaks ISO 8601 in UTC. */
function operationFromJson (json: Record<string, any>): Operation {
  const op = toOperation(json)
  return { ...op, startedAt: isoOrNull(op.startedAt)!, finishedAt: isoOrNull(op.finishedAt) }
}

/** A cursor is the position (insertion order) of the last row of the previous page. */
function encodeCursor (seq: number): string {
  return Buffer.from(String(seq)).toString('base64url')
}

function decodeCursor (cursor: string): number {
  const seq = Number(Buffer.from(cursor, 'base64url').toString())
  if (Number.isSafeInteger(seq) && seq > 0) return seq
  throw new ApiProblem(400, 'Bad Request', 'query.cursor: is not a cursor this API returned', [{ path: 'query.cursor', message: 'is not a cursor this API returned' }])
}

export function createInstancesRepository (db: Pool, unreachableAfterMs: number) {
  const toView = (row: Record<string, any>): InstanceView => toInstanceView(row, unreachableAfterMs)
  return {
    async find (id: string): Promise<InstanceView | null> {
      const { rows } = await db.query(`${INSTANCE_VIEW_QUERY} WHERE i.id = $1`, [id])
      return rows.length === 0 ? null : toView(rows[0])
    },

    /** A page of instances, oldest first; destroyed ones only when asked for by state. */
    async list (options: { limit: number, cursor?: string, state?: InstanceState }) {
      const after = options.cursor === undefined ? 0 : decodeCursor(options.cursor)
      const { rows } = await db.query(
        `${INSTANCE_VIEW_QUERY}
          WHERE ($1::text IS NULL AND i.destroyed_at IS NULL OR i.state = $1) AND i.seq > $2
          ORDER BY i.seq
          LIMIT $3`,
        [options.state ?? null, after, options.limit + 1]
      )
      const page = rows.slice(0, options.limit)
      const nextCursor = rows.length > options.limit ? encodeCursor(page[page.length - 1].seq) : null
      return { items: page.map(toView), nextCursor }
    },

    /** An instance's history, newest first; `null` when the instance does not exist. */
    async listEvents (instanceId: string, options: { limit: number, cursor?: string }) {
      const before = options.cursor === undefined ? Number.MAX_SAFE_INTEGER : decodeCursor(options.cursor)
      const [exists, { rows }] = await Promise.all([
        db.query('SELECT 1 FROM instances WHERE id = $1', [instanceId]),
        db.query(
          `SELECT ${EVENT_COLUMNS}, e.seq FROM instance_events e
            WHERE e.instance_id = $1 AND e.seq < $2
            ORDER BY e.seq DESC LIMIT $3`,
          [instanceId, before, options.limit + 1]
        )
      ])
      if (exists.rowCount === 0) return null
      const page = rows.slice(0, options.limit)
      const nextCursor = rows.length > options.limit ? encodeCursor(page[page.length - 1].seq) : null
      return { items: page.map(toEvent), nextCursor }
    },

    /** An instance's migrations, newest first; `null` when the instance does not exist. */
    async listMigrations (instanceId: string): Promise<MigrationView[] | null> {
      const [exists, { rows }] = await Promise.all([
        db.query('SELECT 1 FROM instances WHERE id = $1', [instanceId]),
        db.query(`SELECT ${MIGRATION_JSON} AS migration FROM migrations m ${MIGRATION_JOINS} WHERE m.instance_id = $1 ORDER BY m.started_at DESC LIMIT 100`, [instanceId])
      ])
      if (exists.rowCount === 0) return null
      return rows.map((row) => migrationView(toMigration(row.migration)))
    },

    async findMigration (instanceId: string, migrationId: string): Promise<MigrationView | null> {
      const { rows } = await db.query(`SELECT ${MIGRATION_JSON} AS migration FROM migrations m ${MIGRATION_JOINS} WHERE m.id = $1 AND m.instance_id = $2`, [migrationId, instanceId])
      return rows.length === 0 ? null : migrationView(toMigration(rows[0].migration))
    },

    async findOperation (id: string): Promise<Operation | null> {
      const { rows } = await db.query(`SELECT ${OPERATION_COLUMNS} FROM operations o WHERE o.id = $1`, [id])
      return rows.length === 0 ? null : toOperation(rows[0])
    },

    async listHosts (): Promise<HostView[]> {
      const { rows } = await db.query(`${HOST_VIEW_QUERY} ORDER BY h.id`)
      return rows.map(toHostView)
    },

    async findHost (id: string): Promise<HostView | null> {
      const { rows } = await db.query(`${HOST_VIEW_QUERY} WHERE h.id = $1`, [id])
      return rows.length === 0 ? null : toHostView(rows[0])
    }
  }
}

export type InstancesRepository = ReturnType<typeof createInstancesRepository>

declare module 'fastify' {
  interface FastifyInstance {
    instancesRepository: InstancesRepository
  }
}

export default fp<{ hostUnreachableAfterMs: number }>(async (fastify, opts) => {
  fastify.decorate('instancesRepository', createInstancesRepository(fastify.db, opts.hostUnreachableAfterMs))
}, { name: 'instances-repository', dependencies: ['database'] })
