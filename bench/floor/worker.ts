/**
 * The floor's worker, a process of its own as vmplane's worker is, with vmplane's worker tuning
 * (worker/tuning.ts), on a task queue of its own:
 *
 *   node dist/bench/floor/worker.js <temporal address> <namespace> <task queue>
 *
 * It says `ready` on stdout once it polls, and stops on SIGTERM.
 */
import { fileURLToPath } from 'node:url'
import { Client, Connection } from '@temporalio/client'
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker'
import { WORKER_TUNING } from '../../worker/tuning.js'
import { createFloorActivities } from './activities.js'

const [address, namespace, taskQueue] = process.argv.slice(2)
if (taskQueue === undefined) {
  console.error('usage: floor/worker.js <temporal address> <namespace> <task queue>')
  process.exit(2)
}

// Warnings and errors only: the benchmark's output is its figures.
Runtime.install({ logger: new DefaultLogger('WARN') })
const client = new Client({ connection: await Connection.connect({ address }), namespace })
const connection = await NativeConnection.connect({ address })
const worker = await Worker.create({
  ...WORKER_TUNING,
  connection,
  namespace,
  taskQueue,
  workflowsPath: fileURLToPath(new URL('./workflows.js', import.meta.url)),
  activities: createFloorActivities(client)
})
process.once('SIGTERM', () => { worker.shutdown() })
const running = worker.run()
console.log('ready')
await running
await connection.close()
await client.connection.close()
