/**
 * The operator's tools, run for real against a test stack: the Temporal CLI (`temporal`, from
 * TEMPORAL_CLI or PATH, as npm test provides it) and `tctl` (on PATH); and the reconciler's
 * record of its passes, where what they do shows.
 */
import { execFile } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { waitFor } from '../../stack/wait.js'
import { api, type TestStack } from './stack.js'

const run = promisify(execFile)

/**
 * What the server answers, through the CLI, when it cannot take a request now (gRPC Unavailable):
 * its history shard reloading after a write whose outcome it does not know, or the server not
 * listening yet. An operator runs the command again; so does `temporalCli`.
 */
const SERVER_UNAVAILABLE = /shard status unknown|code = Unavailable|connection refused/
const UNAVAILABLE_PATIENCE_MS = 30_000

/**
 * Runs the Temporal CLI against the stack, again while the server is unavailable (for up to
 * 30 s). A signal whose first sending the server could not confirm may arrive twice: the
 * signals the tests send this way (declareHostLost, readmitHost, …) ask for a state, so a
 * second changes nothing.
 */
export async function temporalCli (stack: TestStack, ...args: string[]): Promise<string> {
  const command = [...args, '--address', stack.info.temporalAddress, '--namespace', stack.info.namespace]
  const deadline = Date.now() + UNAVAILABLE_PATIENCE_MS
  for (;;) {
    try {
      return (await run(process.env.TEMPORAL_CLI ?? 'temporal', command)).stdout
    } catch (err) {
      if (!SERVER_UNAVAILABLE.test(String((err as { stderr?: unknown }).stderr)) || Date.now() >= deadline) throw err
      await sleep(1000)
    }
  }
}

export async function tctl (stack: TestStack, ...args: string[]): Promise<string> {
  const { stdout } = await run('tctl', ['--address', stack.info.temporalAddress, '--namespace', stack.info.namespace, ...args])
  return stdout
}

/**
 * VMPLANE_RECONCILE_SECONDS for a stack whose reconciler passes only when a test triggers one.
 * A schedule's interval fires at multiples of its period since the epoch, not from the
 * schedule's creation: an hour fires on the hour, inside any test that runs across it. A
 * century's next multiple is in 2070.
 */
export const RECONCILE_ON_DEMAND_ONLY = String(100 * 365.25 * 24 * 3600)

export interface ReconcilePass { id: string, counts: Record<string, number>, actions: string[] }

/** The reconciler's latest recorded pass (GET /v1/admin/reconcile), or null before the first. */
export async function lastReconcilePass (stack: TestStack): Promise<ReconcilePass | null> {
  return (await api(stack).get<{ items: ReconcilePass[] }>('/v1/admin/reconcile?limit=1')).body.items[0] ?? null
}

/** Waits for a pass recorded after the one whose ID is `previousId`. */
export async function nextReconcilePass (stack: TestStack, previousId: string | null): Promise<ReconcilePass> {
  return await waitFor('a new reconcile pass recorded', async () => {
    const pass = await lastReconcilePass(stack)
    return pass !== null && pass.id !== previousId ? pass : null
  }, { timeoutMs: 30_000, intervalMs: 100 })
}
