/**
 * A worker process with vmplane's worker tuning (worker/tuning.ts) that runs only the busy
 * workflow beside it, for tests that freeze a worker mid-activation:
 *
 *   node dist/test/helpers/busy-worker/worker.js <temporal address> <task queue>
 *
 * It says `ready` on stdout once it polls, and stops on SIGTERM.
 */
import { fileURLToPath } from 'node:url'
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker'
import { WORKER_TUNING } from '../../../worker/tuning.js'

const [address, taskQueue] = process.argv.slice(2)
if (taskQueue === undefined) {
  console.error('usage: busy-worker/worker.js <temporal address> <task queue>')
  process.exit(2)
}

Runtime.install({ logger: new DefaultLogger('WARN') })
const connection = await NativeConnection.connect({ address })
const worker = await Worker.create({
  ...WORKER_TUNING,
  connection,
  taskQueue,
  workflowsPath: fileURLToPath(new URL('./workflows.js', import.meta.url))
})
process.once('SIGTERM', () => { worker.shutdown() })
const running = worker.run()
console.log('ready')
await running
await connection.close()
