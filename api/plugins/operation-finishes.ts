/**
 * Word from PostgreSQL that an operation finished (the `operation_finished` notification,
 * db/migrations/006), for requests held by `?wait=`.
 *
 * One connection LISTENs for the whole API. A notification can be missed (the connection drops
 * and is opened again a moment later), so a waiter never relies on one alone: it is also woken
 * after at most `timeoutMs`, and reads the operation's row again either way.
 */
import fp from 'fastify-plugin'
import pg from 'pg'

const CHANNEL = 'operation_finished'
const RECONNECT_MS = 1000

export interface OperationFinishes {
  /**
   * Resolves once the operation is said to have finished, after `timeoutMs`, or when `signal`
   * aborts, whichever comes first. Ask before reading the row, so word that comes in between is
   * not missed.
   */
  next: (operationId: string, timeoutMs: number, signal: AbortSignal) => Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    operationFinishes: OperationFinishes
  }
}

export default fp<{ databaseUrl: string }>(async (fastify, opts) => {
  const waiters = new Map<string, Set<() => void>>()
  let client: pg.Client | null = null
  let closing = false
  let reconnect: NodeJS.Timeout | null = null

  async function listen (): Promise<void> {
    const listener = new pg.Client({ connectionString: opts.databaseUrl })
    listener.on('notification', (message) => {
      for (const wake of waiters.get(message.payload ?? '') ?? []) wake()
    })
    listener.on('error', (error) => {
      fastify.log.warn({ err: error }, 'the operation_finished listener lost its connection; listening again')
      retry(listener)
    })
    try {
      await listener.connect()
      await listener.query(`LISTEN ${CHANNEL}`)
      client = listener
    } catch (error) {
      fastify.log.warn({ err: error }, 'could not listen for operation_finished; held requests poll meanwhile')
      retry(listener)
    }
  }

  function retry (failed: pg.Client): void {
    failed.end().catch(() => {})
    if (client === failed) client = null
    if (closing || reconnect !== null) return
    reconnect = setTimeout(() => {
      reconnect = null
      listen().catch(() => {})
    }, RECONNECT_MS)
  }

  fastify.decorate('operationFinishes', {
    next: async (operationId, timeoutMs, signal) => await new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer)
        signal.removeEventListener('abort', wake)
        const set = waiters.get(operationId)
        set?.delete(wake)
        if (set?.size === 0) waiters.delete(operationId)
        resolve()
      }
      const timer = setTimeout(wake, timeoutMs)
      signal.addEventListener('abort', wake, { once: true })
      waiters.set(operationId, (waiters.get(operationId) ?? new Set()).add(wake))
    })
  })
  await listen()
  fastify.addHook('onClose', async () => {
    closing = true
    if (reconnect !== null) clearTimeout(reconnect)
    await client?.end()
  })
}, { name: 'operation-finishes' })
