/** `node dist/bundle/worker.js` (this file bundled): runs the worker until SIGINT or SIGTERM. */
import { loadConfigOrExit, workerConfig } from '../config/index.js'
import { createLogger } from '../log/logger.js'
import { runWorker } from '../worker/index.js'

// What ps, top and process accounting show for this process, in place of `node`.
process.title = 'vmplane-worker'
const config = loadConfigOrExit(workerConfig, 'worker')
const logger = createLogger(config.log, 'worker')
// The SDK's runtime takes these signals too, and shuts down the running worker; this ends a
// worker still trying to reach Temporal, which its supervisor would otherwise have to SIGKILL.
const stop = new AbortController()
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => { stop.abort() })
try {
  await runWorker(config, logger, stop.signal)
  logger.info('worker stopped')
} catch (err) {
  logger.fatal({ err }, 'worker failed')
  process.exit(1)
}
