/**
 * The floor's side of the benchmark: its worker process (worker.ts) on a task queue of its own,
 * and the operation a client runs to completion on it.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { Client, Connection } from '@temporalio/client'
import { floorOperation } from './workflows.js'

const FLOOR_TASK_QUEUE = 'vmplane-bench-floor'
const WORKER = fileURLToPath(new URL('./worker.js', import.meta.url))

export class Floor {
  private constructor (readonly client: Client, private readonly worker: ChildProcess) {}

  static async start (temporal: { address: string, namespace: string }): Promise<Floor> {
    const worker = spawn(process.execPath, [WORKER, temporal.address, temporal.namespace, FLOOR_TASK_QUEUE], { stdio: ['ignore', 'pipe', 'inherit'] })
    await new Promise<void>((resolve, reject) => {
      const exited = (code: number | null): void => { reject(new Error(`the floor worker exited with code ${code} before it was ready`)) }
      worker.once('exit', exited)
      createInterface({ input: worker.stdout! }).on('line', (line) => {
        if (line !== 'ready') return
        worker.off('exit', exited)
        resolve()
      })
    })
    const client = new Client({ connection: await Connection.connect({ address: temporal.address }), namespace: temporal.namespace })
    return new Floor(client, worker)
  }

  get pid (): number {
    return this.worker.pid!
  }

  /** One floor operation, from start to completion; its execution, to read its history. */
  async operate (): Promise<{ workflowId: string, runId: string }> {
    const handle = await this.client.workflow.start(floorOperation, { taskQueue: FLOOR_TASK_QUEUE, workflowId: `floor-${randomUUID()}` })
    await handle.result()
    return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId }
  }

  async stop (): Promise<void> {
    if (this.worker.exitCode === null) {
      this.worker.kill('SIGTERM')
      await once(this.worker, 'exit')
    }
    await this.client.connection.close()
  }
}
