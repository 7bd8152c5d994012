/**
 * A worker that cannot do its start-up work against Temporal keeps trying (worker/until-done.ts),
 * and SIGTERM meanwhile ends it cleanly, as it ends a worker that runs. The SDK's runtime takes
 * the signal too, but shuts down only the workers it runs: before vmplane's own handler, a worker
 * making the reconciler's schedule went on trying until its supervisor SIGKILLed it, and one
 * still connecting died by the signal.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePorts } from '../helpers/launcher.js'
import { waitUntil } from '../../stack/wait.js'
import { WORKER_ENTRY } from '../../stack/components.js'
import { startLocalTemporal } from '../helpers/workflow-environment.js'

describe('a worker asked to end while it starts', { timeout: 120_000 }, () => {
  it('ends on SIGTERM, exiting 0, while Temporal refuses its connections', async () => {
    // Nothing listens on the port: every connection is refused.
    await endsOnSigterm(`127.0.0.1:${await freePorts(1)}`, 'could not connect to Temporal')
  })

  it('ends on SIGTERM, exiting 0, while Temporal refuses to make the reconciler\'s schedule', async () => {
    const temporal = await startLocalTemporal(['--dynamic-config-value', 'frontend.enableSchedules=false'])
    try {
      await endsOnSigterm(temporal.address, 'could not make or update the reconciler schedule')
    } finally {
      await temporal.teardown()
    }
  })
})

/** Starts the worker on `temporalAddress`, SIGTERMs it once it logs `retrying`, and holds it to exit 0. */
async function endsOnSigterm (temporalAddress: string, retrying: string): Promise<void> {
  const worker = spawn(process.execPath, [WORKER_ENTRY], {
    env: {
      PATH: process.env.PATH,
      // Never reached: the worker's pool connects only when an activity runs.
      DATABASE_URL: 'postgres://vmplane@127.0.0.1:1/vmplane',
      VMPLANE_AGENT_TOKEN: 'a-token-of-sixteen-characters-or-more',
      VMPLANE_TEMPORAL_ADDRESS: temporalAddress,
      VMPLANE_WORKER_METRICS_PORT: String(await freePorts(1))
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  for (const stream of [worker.stdout, worker.stderr]) stream.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = once(worker, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  try {
    await waitUntil(`the worker logs "${retrying}"`, async () => output.includes(retrying), { timeoutMs: 30_000 })
    worker.kill('SIGTERM')
    // Its next try is at most 15 s away: one that ignored the signal would still run after them.
    const ended = await Promise.race([exited, sleep(20_000, null, { ref: false })])
    assert.notEqual(ended, null, `the worker still runs 20 s after SIGTERM:\n${output}`)
    assert.deepEqual(ended, [0, null], output)
  } finally {
    if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL')
  }
}
