/**
 * The instance workflows' part in `inject` tests whose Temporal is a stub
 * (helpers/temporal-stub.ts): the rows their executions would write when an operation ends,
 * written here, so the API reads what it would read after a real execution (its waiters woken by
 * the operation's NOTIFY, its verdicts made on the new state).
 */
import { randomUUID } from 'node:crypto'
import { inTransaction, type Pool } from '../../db/pool.js'
import { instanceWorkflowId } from '../../domain/ids.js'
import type { TemporalStub } from './temporal-stub.js'

/**
 * The instance's operations in flight end succeeded, leaving it `state` (its active VMM on
 * `hostId` when it runs), and its execution ends with them.
 */
export async function endOperations (db: Pool, temporal: TemporalStub, instanceId: string, state: 'running' | 'stopped', hostId = 'host-1'): Promise<void> {
  // In one transaction, as an execution's change is: a waiter woken by the operation's end reads
  // the instance's new state with it.
  await inTransaction(db, async (tx) => {
    const vmm = state === 'running' ? randomUUID() : null
    if (vmm !== null) await tx.query("INSERT INTO vmms (id, instance_id, host_id, state) VALUES ($1, $2, $3, 'running')", [vmm, instanceId, hostId])
    await tx.query('UPDATE instances SET state = $2, active_vmm_id = $3 WHERE id = $1', [instanceId, state, vmm])
    await tx.query("UPDATE operations SET status = 'succeeded', finished_at = now() WHERE instance_id = $1 AND finished_at IS NULL", [instanceId])
  })
  temporal.release(instanceWorkflowId(instanceId))
}

/** The instance named `name`, once the API has recorded an operation of it in flight: its ID. */
export async function instanceWithOperation (db: Pool, name: string, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const { rows } = await db.query<{ id: string }>(
      'SELECT i.id FROM instances i JOIN operations o ON o.instance_id = i.id WHERE i.name = $1 AND o.finished_at IS NULL', [name])
    if (rows.length > 0) return rows[0]!.id
    if (Date.now() > deadline) throw new Error(`no operation of instance ${name} was recorded in flight`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
